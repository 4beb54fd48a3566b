-- The stopping-policy advice of one run, one row per (judge, config, policy).
SELECT * EXCLUDE (run_id) FROM advice WHERE run_id = $run_id
ORDER BY judge, config, policy
