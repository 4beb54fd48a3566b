-- {{name}}.parquet of every run, with the run_id taken from its folder runs/<run_id>/.
CREATE OR REPLACE VIEW "{{name}}" AS
WITH files AS (
    SELECT * FROM read_parquet({{source}}, filename = true, union_by_name = true)
),
named AS (
    SELECT
        regexp_extract(filename, '/runs/([^/]+)/[^/]+$', 1) AS run_id,
        * EXCLUDE (filename)
    FROM files
)
SELECT * FROM named
