-- Per-pair expected scores of one run, in a fixed order, for the bootstrap over pairs.
WITH pairs AS (
    SELECT judge, config, dataset, design, policy, pair_id, expected_score
    FROM replay
    WHERE run_id = $run_id
)
SELECT * FROM pairs
ORDER BY judge, config, dataset, design, policy, pair_id
