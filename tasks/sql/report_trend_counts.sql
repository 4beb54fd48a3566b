-- Every run's calls of each value per (judge, config, pair, order), for the trends page's
-- Krippendorff's alpha (docs/design.md#agreement): `I` and `M` are missing data, not values.
SELECT run_id, judge, config, dataset, pair_id, "order", outcome, count(*) AS calls
FROM outcomes
WHERE outcome IN ('A', 'B', 'T', 'X')
GROUP BY run_id, judge, config, dataset, pair_id, "order", outcome
ORDER BY run_id, judge, config, dataset, pair_id, "order", outcome
