-- The trusted presentation maps of every stored plan.
CREATE OR REPLACE VIEW presentations AS
WITH files AS (
    SELECT * FROM read_parquet({{source}}, union_by_name = true)
)
SELECT * FROM files
