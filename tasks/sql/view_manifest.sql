-- The frozen manifests: one row per pair of every stored manifest.
CREATE OR REPLACE VIEW manifest AS
WITH files AS (
    SELECT * FROM read_parquet({{source}}, union_by_name = true)
)
SELECT * FROM files
