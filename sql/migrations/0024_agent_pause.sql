-- An agent that answers a delivery with 429 or 503 and a Retry-After asks
-- for no work until then: it is paused, not failed. The job's
-- ATTEMPT_FAILED (reason agent_paused, with paused_until) is the record;
-- this column, written in the same transaction, is what the router reads.
ALTER TABLE agents ADD COLUMN paused_until timestamptz;
