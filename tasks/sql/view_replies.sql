-- Stored replies: the cache may hold one call_key in several files; the earliest wins,
-- as when the cache itself reads it.
CREATE OR REPLACE VIEW replies AS
WITH files AS (
    SELECT * FROM read_parquet({{source}}, filename = true, union_by_name = true)
),
ranked AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY call_key ORDER BY received_at, filename) AS copy_rank
    FROM files
)
SELECT * EXCLUDE (filename, copy_rank) FROM ranked WHERE copy_rank = 1
