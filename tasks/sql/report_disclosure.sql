-- Disclosure counts of one run per (judge, config, dataset): nothing leaves a denominator,
-- consistency and accuracy stay separate columns.
WITH chosen AS (
    SELECT * FROM disclosure WHERE run_id = $run_id
)
SELECT
    judge, config, dataset,
    planned, valid, missing, invalid, abstained, tied,
    conflicting, mixed, stable, stable_tie, incomplete,
    stable_correct, stable_wrong,
    consistency, accuracy_of_stable
FROM chosen
ORDER BY judge, config, dataset
