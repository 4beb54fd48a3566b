-- Per-pair design metrics of one run (SPEC section 4).
WITH chosen AS (
    SELECT * EXCLUDE (run_id) FROM design WHERE run_id = $run_id
)
SELECT * FROM chosen
ORDER BY judge, config, dataset, pair_id, design
