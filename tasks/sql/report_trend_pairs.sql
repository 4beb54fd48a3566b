-- Per-pair reference scores of every run per (judge, config) under the design the trends page
-- uses (balanced, or the first a run replayed), in a fixed order, for the bootstrap.
WITH design_of AS (
    SELECT run_id,
        CASE WHEN bool_or(design = 'balanced') THEN 'balanced' ELSE min(design) END AS design
    FROM summary
    GROUP BY run_id
)
SELECT r.run_id, r.judge, r.config, r.dataset, r.pair_id, avg(r.reference_score) AS score
FROM replay r JOIN design_of d ON r.run_id = d.run_id AND r.design = d.design
GROUP BY r.run_id, r.judge, r.config, r.dataset, r.pair_id
ORDER BY r.run_id, r.judge, r.config, r.dataset, r.pair_id
