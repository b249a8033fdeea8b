-- The log's index on (type, recorded_at) had one reader, reach_recovery,
-- which looks for agents' health marks, yet every event paid for it. A
-- partial index over those marks alone is written only by them.
DROP INDEX events_type_recorded_idx;
CREATE INDEX events_agent_marks_idx ON events (stream_id, position)
    WHERE type IN ('HEALTH_DEGRADED', 'HEALTH_RECOVERED', 'AGENT_STATE_CHANGED');
