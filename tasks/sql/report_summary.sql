-- The replay summary of one run, one row per (judge, config, dataset, design, policy).
WITH chosen AS (
    SELECT * EXCLUDE (run_id) FROM summary WHERE run_id = $run_id
)
SELECT * FROM chosen
ORDER BY judge, config, dataset, design, policy
