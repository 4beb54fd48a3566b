-- Every run's headline figures per (judge, config), for the trends page: the reference score
-- under the balanced design (or the first design a run replayed), consistency and valid share
-- (the disclosure), the left slot's share of order conflicts, failed calls, and the expected
-- savings of paired unanimity. One row per (run_id, judge, config).
WITH design_of AS (
    SELECT run_id,
        CASE WHEN bool_or(design = 'balanced') THEN 'balanced' ELSE min(design) END AS design
    FROM summary
    GROUP BY run_id
),
disc AS (
    SELECT run_id, judge, config,
        sum(planned) AS planned, sum(valid) AS valid, sum(stable) AS stable,
        sum(conflicting) AS conflicting, sum(mixed) AS mixed
    FROM disclosure
    GROUP BY run_id, judge, config
),
bias AS (
    SELECT run_id, judge, config,
        count(*) FILTER (WHERE disposition = 'order_conflict') AS conflicts,
        count(*) FILTER (WHERE disposition = 'order_conflict' AND outcome_ab = 'A') AS left_left
    FROM dispositions
    GROUP BY run_id, judge, config
),
fails AS (
    SELECT run_id, judge, config, count(*) FILTER (WHERE status = 'failed') AS failed_calls
    FROM calls
    GROUP BY run_id, judge, config
),
saved AS (
    SELECT s.run_id, s.judge, s.config, sum(s.savings * s.pairs) / sum(s.pairs) AS pu_savings
    FROM summary s JOIN design_of d ON s.run_id = d.run_id AND s.design = d.design
    WHERE s.policy = 'paired_unanimity'
    GROUP BY s.run_id, s.judge, s.config
),
score AS (
    -- Every policy's row of a design carries its pair's reference score: the mean over all
    -- rows equals the mean over pairs.
    SELECT r.run_id, r.judge, r.config, avg(r.reference_score) AS score,
        count(DISTINCT (r.dataset, r.pair_id)) AS pairs
    FROM replay r JOIN design_of d ON r.run_id = d.run_id AND r.design = d.design
    GROUP BY r.run_id, r.judge, r.config
)
SELECT
    disc.run_id, disc.judge, disc.config, design_of.design,
    score.pairs, score.score,
    disc.stable / nullif(disc.stable + disc.conflicting + disc.mixed, 0) AS consistency,
    bias.left_left / nullif(bias.conflicts, 0) AS left_share,
    disc.valid / nullif(disc.planned, 0) AS valid_share,
    coalesce(fails.failed_calls, 0) AS failed_calls,
    saved.pu_savings
FROM disc
JOIN design_of USING (run_id)
LEFT JOIN score USING (run_id, judge, config)
LEFT JOIN bias USING (run_id, judge, config)
LEFT JOIN fails USING (run_id, judge, config)
LEFT JOIN saved USING (run_id, judge, config)
ORDER BY disc.run_id, disc.judge, disc.config
