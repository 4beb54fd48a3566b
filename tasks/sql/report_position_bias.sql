-- Position bias of one run per (judge, config, dataset). An order conflict (A in one order,
-- B in the other) means the same slot won both times: A then B is Left twice, B then A is
-- Right twice. Also the Left share among all decisive calls.
WITH cells AS (
    SELECT judge, config, dataset, disposition, outcome_ab, outcome_ba
    FROM dispositions
    WHERE run_id = $run_id
),
conflicts AS (
    SELECT
        judge, config, dataset,
        count(*) FILTER (WHERE disposition = 'order_conflict') AS conflicts,
        count(*) FILTER (
            WHERE disposition = 'order_conflict' AND outcome_ab = 'A' AND outcome_ba = 'B'
        ) AS left_left,
        count(*) FILTER (
            WHERE disposition = 'order_conflict' AND outcome_ab = 'B' AND outcome_ba = 'A'
        ) AS right_right
    FROM cells
    GROUP BY judge, config, dataset
),
decisive AS (
    SELECT
        judge, config, dataset,
        count(*) AS decisive_calls,
        count(*) FILTER (WHERE label = 'Left') AS left_wins
    FROM outcomes
    WHERE run_id = $run_id AND outcome IN ('A', 'B')
    GROUP BY judge, config, dataset
)
SELECT
    c.judge, c.config, c.dataset,
    c.conflicts,
    c.left_left,
    c.right_right,
    (c.left_left + c.right_right) / nullif(c.conflicts, 0) AS same_slot_share,
    c.left_left / nullif(c.conflicts, 0) AS left_share_of_conflicts,
    coalesce(d.decisive_calls, 0) AS decisive_calls,
    coalesce(d.left_wins, 0) AS left_wins,
    d.left_wins / nullif(d.decisive_calls, 0) AS left_share_of_decisive
FROM conflicts AS c
LEFT JOIN decisive AS d USING (judge, config, dataset)
ORDER BY judge, config, dataset
