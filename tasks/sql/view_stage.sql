-- A stage table whose rows already say where they belong (manifests, plans, calls,
-- attempts): every stored file of the stage as one relation.
CREATE OR REPLACE VIEW "{{name}}" AS
WITH files AS (
    SELECT * FROM read_parquet({{source}}, union_by_name = true)
)
SELECT * FROM files
