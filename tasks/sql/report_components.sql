-- Nonadaptive components of one run (docs/design.md#cost-to-match): each one's cost and its mean
-- agreement with the reference decision, per (judge, config, dataset, design).
WITH chosen AS (
    SELECT * EXCLUDE (run_id) FROM components WHERE run_id = $run_id
)
SELECT * FROM chosen
ORDER BY judge, config, dataset, design, cost, component
