-- Every attempt to send a call (append-only log; each row already names its run).
CREATE OR REPLACE VIEW attempts AS
WITH files AS (
    SELECT * FROM read_parquet({{source}}, union_by_name = true)
)
SELECT * FROM files
