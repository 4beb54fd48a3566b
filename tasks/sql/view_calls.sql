-- Planned calls of every run (CallRecord carries its own run_id).
CREATE OR REPLACE VIEW calls AS
WITH files AS (
    SELECT * FROM read_parquet({{source}}, union_by_name = true)
)
SELECT * FROM files
