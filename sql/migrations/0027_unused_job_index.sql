-- No statement reads jobs by agent with status DELIVERED any more (an
-- agent's load is its rows in agent_slots): the index only cost writes.
DROP INDEX IF EXISTS jobs_in_flight_idx;
