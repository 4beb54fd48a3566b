-- Per-pair design metrics of one run (docs/design.md#design-metrics).
WITH chosen AS (
    SELECT * EXCLUDE (run_id) FROM design WHERE run_id = $run_id
)
SELECT * FROM chosen
ORDER BY judge, config, dataset, pair_id, design
