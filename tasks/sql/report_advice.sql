-- The stopping-policy advice of one run, one row per (judge, config, rank).
SELECT * EXCLUDE (run_id) FROM advice WHERE run_id = $run_id
ORDER BY judge, config, rank
