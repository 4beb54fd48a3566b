-- Per (judge, config, dataset, design, policy) of one run: score, expected calls, savings,
-- decision changes by kind, the added variance of the aggregate score and the cost to match.
-- The bootstrap interval of the score is added in Python from report_score_pairs.sql.
-- A (judge, config, dataset) with no valid outcome has no score (NULL): the replay scores
-- its all-missing pairs as neutral (0.5), which is no measurement.
WITH pairs AS (
    SELECT * FROM replay WHERE run_id = $run_id
),
grouped AS (
    SELECT
        judge, config, dataset, design, policy,
        count(*) AS pairs,
        avg(expected_score) AS score,
        avg(reference_score) AS reference_score,
        avg(expected_calls) AS expected_calls,
        avg(p_change) AS p_change,
        avg(p_neutral_to_decisive) AS p_neutral_to_decisive,
        avg(p_decisive_to_neutral) AS p_decisive_to_neutral,
        avg(p_reversal) AS p_reversal,
        -- pairs are independent: Var(mean) adds sum(var_i) / n^2
        sum(added_variance) / (count(*) * count(*)) AS score_added_variance
    FROM pairs
    GROUP BY judge, config, dataset, design, policy
),
measured AS (
    SELECT judge, config, dataset, valid FROM disclosure WHERE run_id = $run_id
),
summarised AS (
    SELECT judge, config, dataset, design, policy, savings, match_cost, match_extra
    FROM summary
    WHERE run_id = $run_id
)
SELECT
    g.* REPLACE (
        CASE WHEN m.valid = 0 THEN NULL ELSE g.score END AS score,
        CASE WHEN m.valid = 0 THEN NULL ELSE g.reference_score END AS reference_score
    ),
    s.savings,
    s.match_cost,
    s.match_extra
FROM grouped AS g
LEFT JOIN summarised AS s USING (judge, config, dataset, design, policy)
LEFT JOIN measured AS m USING (judge, config, dataset)
ORDER BY judge, config, dataset, design, policy
