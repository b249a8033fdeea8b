-- Statements of package jobs: submits, the jobs read model's list, approval
-- policies, timers, callback secrets and the sweeps. The event log is
-- eventstore's; River's own rows are read through River's client, but for
-- RiverQueueDepths.

-- name: LockIdempotencyKeys
-- Takes the advisory locks of the Idempotency-Keys of a transaction's
-- submits ($1[i] namespace, $2[i] key), in one order: a submit claims its
-- key under the lock, so no two submits claim one, and the transaction
-- that holds it claims the key in its commit only if its job is written.
SELECT pg_advisory_xact_lock(h) FROM (
    SELECT DISTINCT hashtextextended(n || '/' || k, 2) AS h FROM unnest($1::text[], $2::text[]) AS u(n, k)
) AS keys ORDER BY h;

-- name: IdempotencyKeysHeld
-- The keys among ($1[i] namespace, $2[i] key) that earlier submits hold,
-- with the job each created and the hash of its request.
SELECT i.namespace, i.key, i.job_id::text, i.request_hash
FROM unnest($1::text[], $2::text[]) AS u(namespace, key)
JOIN idempotency_keys i ON i.namespace = u.namespace AND i.key = u.key;

-- name: ClaimIdempotencyKeys
-- Records the Idempotency-Keys of a transaction's new jobs ($1[i]
-- namespace, $2[i] key, $3[i] job, $4[i] hash of the request), their
-- locks held (LockIdempotencyKeys). A key claimed meanwhile by a process
-- that takes no lock (a release before this one) fails the statement
-- (idempotency_keys_pkey): the transaction runs again and finds it held.
INSERT INTO idempotency_keys (namespace, key, job_id, request_hash)
SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::bytea[]);

-- name: CountRootDescendant
-- Counts one more descendant against a root job and returns how many it has.
INSERT INTO job_roots (root_job_id, descendants) VALUES ($1, 1)
ON CONFLICT (root_job_id) DO UPDATE SET descendants = job_roots.descendants + 1
RETURNING descendants;

-- name: ListJobs
-- A page of the jobs read model, newest first. jobstore.List appends the
-- conditions of the filters given, then ORDER BY jobs.job_id DESC and the
-- limit: each combination is a statement of its own, whose plan walks the
-- index that leads with its columns (jobs_namespace_job_idx,
-- jobs_status_idx, jobs_capability_idx, jobs_agent_idx, jobs_via_idx, or the primary key)
-- from the cursor, and stops at the page's end.
SELECT job_id::text, namespace, capability, status, coalesce(agent_id, ''), attempts,
       max_attempts, priority, coalesce(biz_code, ''), coalesce(error, ''), coalesce(trace_id, ''),
       submitted_at, updated_at, finished_at, coalesce(via, 'rest')
FROM jobs

-- name: ListNamespaces
-- The namespaces that hold jobs, by a loose scan of jobs_namespace_job_idx
-- (one probe a namespace, however many jobs), for a list across
-- namespaces with a filter (jobstore.listQuery).
WITH RECURSIVE namespaces AS (
    (SELECT namespace FROM jobs ORDER BY namespace LIMIT 1)
    UNION ALL
    SELECT (SELECT j.namespace FROM jobs j WHERE j.namespace > n.namespace ORDER BY j.namespace LIMIT 1)
    FROM namespaces n WHERE n.namespace IS NOT NULL
)
SELECT namespace FROM namespaces WHERE namespace IS NOT NULL;

-- name: EnsureCallbackSecret
-- A namespace's callback secret ($2 if it had none yet) and, during a rotation's overlap, the previous one.
WITH ins AS (
    INSERT INTO signing_secrets (name, secret) VALUES ($1, $2) ON CONFLICT DO NOTHING
    RETURNING secret, prev_secret, prev_expires_at)
SELECT * FROM ins UNION ALL
SELECT secret, prev_secret, prev_expires_at FROM signing_secrets WHERE name = $1 LIMIT 1;

-- name: RotateCallbackSecret
-- Replaces a callback secret, keeping the old one as previous until $2.
UPDATE signing_secrets SET prev_secret = secret, prev_expires_at = $2, secret = $3, created_at = now()
WHERE name = $1;

-- name: ApprovalPatternsOf
-- The approval patterns of some namespaces and of every namespace ('*'), for submits.
SELECT namespace, pattern FROM approval_policies WHERE namespace = ANY($1) OR namespace = '*';

-- name: ApprovalPolicyOfNamespace
-- One namespace's own approval patterns, sorted, for the policy route.
SELECT pattern FROM approval_policies WHERE namespace = $1 ORDER BY pattern;

-- name: DeleteApprovalPolicy
-- Empties a namespace's approval policy before its new patterns are written.
DELETE FROM approval_policies WHERE namespace = $1;

-- name: InsertApprovalPattern
-- One pattern of a namespace's approval policy, with who set it.
INSERT INTO approval_policies (namespace, pattern, created_by) VALUES ($1, $2, $3);

-- name: DueJobTimers
-- The jobs whose timers are due at $1, for the deadline sweep: the attempts
-- waiting for a slot first, the most urgent first (a slot may be theirs),
-- then the others, oldest first.
SELECT job_id::text FROM job_timers WHERE due_at <= $1 ORDER BY rank_at NULLS LAST, due_at LIMIT 500;

-- name: LockDueJobTimer
-- Takes a job's timer for this sweeper; no row when it is gone or another sweeper holds it.
SELECT attempt, phase, due_at, river_job_id, waiting_since, coalesce(capability, ''), rank_at, agent_id FROM job_timers WHERE job_id = $1 FOR UPDATE SKIP LOCKED;

-- name: LockJobTimers
-- Takes the timer rows of a shared write's jobs, in job order, before it
-- appends to them: the deadline sweep takes a job's row first and appends
-- after, so the same order keeps the two from deadlocking.
SELECT 1 FROM job_timers WHERE job_id = ANY($1::uuid[]) ORDER BY job_id FOR UPDATE;

-- name: PostponeJobTimer
-- Moves a job's timer to $2: its River job is still alive.
UPDATE job_timers SET due_at = $2 WHERE job_id = $1;

-- name: JobsNeedingRepair
-- Open jobs quiet since $1, and finished ones with an unanswered callback, that have no timer at all.
SELECT job_id::text FROM jobs j
WHERE (status IN ('SUBMITTED', 'TIMEOUT') AND updated_at < $1
    OR finished_at < $1 AND callback_url IS NOT NULL AND NOT callback_done)
  AND NOT EXISTS (SELECT 1 FROM job_timers t WHERE t.job_id = j.job_id)
ORDER BY updated_at LIMIT 500;

-- name: PruneIdempotencyKeys
-- Forgets Idempotency-Keys older than $1.
DELETE FROM idempotency_keys WHERE created_at < $1;


-- name: RiverQueueDepths
-- Jobs waiting in River per queue, for the states in $1 (rivertype's names,
-- passed by the caller). River's client has no count: JobList would page
-- through every waiting row to count them, and the driver's count
-- (JobCountByQueueAndState) is not for callers and counts available and
-- running only. So this is the one read of River's table outside River.
SELECT queue, count(*) FROM river_job WHERE state = ANY($1::river_job_state[]) GROUP BY queue;

-- name: DropAllJobTimers
-- Drops every timer, with the dispatch backlog, for benchmarks.
DELETE FROM job_timers;

-- name: DropAllAgentSlots
-- Drops every agent slot (the dropped backlog's attempts routed at submit hold some), for benchmarks.
DELETE FROM agent_slots;

-- name: ZeroLaneDepths
-- Every lane's depth set to zero and its entries dropped, after its timers were dropped with the backlog, for benchmarks.
WITH entries AS (DELETE FROM lane_entries) UPDATE lane_depths SET depth = 0;

-- name: VerifyDumpTable :template
-- Every row of a read model's table (%s, a sanitised identifier) as text, sorted, to compare with its rebuild.
SELECT t::text FROM %s t ORDER BY 1;

-- name: LockAgentSlots
-- Serialises slot-taking for one agent (namespace, agent id) until the transaction ends.
SELECT pg_advisory_xact_lock(hashtextextended($1::text || '/' || $2::text, 0));

-- name: TryLockAgentSlots
-- LockAgentSlots without waiting: false when another transaction holds it.
SELECT pg_try_advisory_xact_lock(hashtextextended($1::text || '/' || $2::text, 0));

-- name: CountAgentSlots
-- How many attempts hold a slot of the agent.
SELECT count(*) FROM agent_slots WHERE namespace = $1 AND agent_id = $2;

-- name: CountSlotsOfAgents
-- How many attempts hold a slot of each of the agents ($1[i], $2[i]) that hold any.
SELECT s.namespace, s.agent_id, count(*)::int FROM agent_slots s
JOIN unnest($1::text[], $2::text[]) AS a(namespace, agent_id) USING (namespace, agent_id)
GROUP BY s.namespace, s.agent_id;

-- name: WaitersOfAgents
-- The attempts whose turn at a slot of each agent ($1[i], $2[i]) came: a
-- slot of that agent given back woke them (their timer names it), and their
-- retry timer is due or their dispatch queued; with their ranks. A waiter
-- looking again by itself takes no turn from anyone.
SELECT k.namespace, k.agent_id, t.job_id::text, t.rank_at
FROM unnest($1::text[], $2::text[]) AS k(namespace, agent_id)
JOIN job_timers t ON t.namespace = k.namespace AND t.agent_id = k.agent_id
WHERE t.capability IS NOT NULL AND (t.phase = 'queued' OR (t.phase = 'retry' AND t.due_at <= now()));

-- name: GoneAgentsClaims
-- The attempts pull agents hold claimed (a slot and a delivered timer)
-- although the agent went DOWN (its lease lapsed) or OFFLINE.
SELECT s.job_id::text, a.state FROM agent_slots s
JOIN agents a ON a.namespace = s.namespace AND a.agent_id = s.agent_id
JOIN job_timers t ON t.job_id = s.job_id
WHERE a.mode = 'pull' AND a.state IN ('DOWN', 'OFFLINE') AND t.phase = 'delivered'
LIMIT 500;

-- name: TransactionTime
-- When the transaction began (what its events record as recorded_at), and
-- its id: should the connection die during COMMIT, eventstore.CommitOutcome asks
-- whether it committed.
SELECT now(), pg_current_xact_id()::text;

-- name: LockLanes
-- Takes the depth rows of the lanes ($1[i] namespace, $2[i] lane, sorted)
-- a submit adds jobs to, making those missing: no other submit to them
-- decides until this transaction ends.
INSERT INTO lane_depths (namespace, lane) SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (namespace, lane) DO UPDATE SET depth = lane_depths.depth;

-- name: LaneDepths
-- How many jobs wait in each lane ($1[i] namespace, $2[i] lane; all with
-- NULL): never fewer than the truth (jobs that left are subtracted by a
-- recount only).
SELECT d.namespace, d.lane, d.depth + coalesce((SELECT sum(e.n) FROM lane_entries e
    WHERE e.namespace = d.namespace AND e.lane = d.lane), 0)::int
FROM lane_depths d
WHERE $1::text[] IS NULL OR (d.namespace, d.lane) IN (SELECT * FROM unnest($1::text[], $2::text[]));

-- name: RecountLanes
-- Sets each lane's depth ($1[i] namespace, $2[i] lane, rows taken by
-- LockLanes) to its jobs' waiting timers, folding the entries this
-- statement sees (one snapshot: an entry committed later stays, and its
-- timer was not counted).
WITH lanes AS (
    SELECT * FROM unnest($1::text[], $2::text[]) AS l(namespace, lane)
), folded AS (
    DELETE FROM lane_entries e USING lanes l WHERE e.namespace = l.namespace AND e.lane = l.lane
), waiting AS (
    SELECT t.namespace, t.lane, count(*)::int AS n FROM job_timers t
    WHERE t.phase IN ('queued', 'retry', 'routed', 'inbox', 'ordered') AND (t.namespace, t.lane) IN (SELECT * FROM lanes)
    GROUP BY t.namespace, t.lane
)
UPDATE lane_depths d SET depth = coalesce(w.n, 0)
FROM lanes l LEFT JOIN waiting w ON w.namespace = l.namespace AND w.lane = l.lane
WHERE d.namespace = l.namespace AND d.lane = l.lane;

-- name: AllLanes
-- Every lane that has a depth row or entries, sorted: the pressure sweep's.
SELECT namespace, lane FROM lane_depths UNION SELECT namespace, lane FROM lane_entries ORDER BY 1, 2;

-- name: AddLaneDepths
-- Adds the jobs a submit admitted to their lanes' depths (rows taken by LockLanes).
UPDATE lane_depths d SET depth = d.depth + a.n FROM unnest($1::text[], $2::text[], $3::int[]) AS a(namespace, lane, n)
WHERE d.namespace = a.namespace AND d.lane = a.lane;

-- name: AddLaneEntries
-- Jobs that came back to waiting for an attempt, taking no lock.
INSERT INTO lane_entries (namespace, lane, n) SELECT * FROM unnest($1::text[], $2::text[], $3::int[]);

-- name: ClaimInbox
-- The oldest $3 attempts waiting in pull agent $1/$2's inbox, locked for this claim; those another claim or sweeper holds are skipped.
SELECT job_id::text, attempt FROM job_timers
WHERE phase = 'inbox' AND namespace = $1 AND agent_id = $2
ORDER BY due_at LIMIT $3 FOR UPDATE SKIP LOCKED;

-- name: NotifyInbox
-- Wakes the claims of pull agent $2 ("namespace/agent_id") when the transaction commits.
SELECT pg_notify($1, $2);

-- name: InboxDepths
-- How many attempts wait in each pull agent's inbox.
SELECT namespace, agent_id, count(*)::int FROM job_timers WHERE phase = 'inbox' GROUP BY namespace, agent_id;

-- name: CancelledOfAgent
-- The jobs of agent $1/$2 cancelled since $3 (their latest attempt was the agent's), newest first.
SELECT job_id::text, attempts FROM jobs
WHERE namespace = $1 AND agent_id = $2 AND status = 'CANCELLED' AND finished_at > $3
ORDER BY finished_at DESC LIMIT 100;

-- name: SetJobTimers
-- Sets the timers of a shared transaction's writes in one statement (SetJobTimer's, a job a row).
INSERT INTO job_timers (job_id, attempt, agent_id, phase, due_at, river_job_id, waiting_since, namespace, capability, rank_at, lane)
SELECT job_id, attempt, agent_id, phase, due_at, river_job_id, waiting_since, namespace, NULLIF(capability, ''), rank_at, lane
FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::timestamptz[], $6::bigint[], $7::timestamptz[], $8::text[],
    $9::text[], $10::timestamptz[], $11::text[])
    AS t(job_id, attempt, agent_id, phase, due_at, river_job_id, waiting_since, namespace, capability, rank_at, lane)
ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt, agent_id = excluded.agent_id,
    phase = excluded.phase, due_at = excluded.due_at, river_job_id = excluded.river_job_id,
    waiting_since = excluded.waiting_since, namespace = excluded.namespace,
    capability = excluded.capability, rank_at = excluded.rank_at, lane = excluded.lane;

-- name: ClearJobTimers
-- Drops the timers of a shared transaction's writes that leave nothing to watch.
DELETE FROM job_timers WHERE job_id = ANY($1::uuid[]);

-- name: RecordAgentAttempts
-- The attempts' outcomes of a shared transaction's writes, in one statement.
INSERT INTO agent_attempts (namespace, agent_id, at, ok)
SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bool[]);

-- name: TakeAgentSlotsReplacing
-- The slots a shared transaction's writes take: a job's latest attempt holds a slot of its agent, a job at most one.
INSERT INTO agent_slots (job_id, namespace, agent_id, attempt)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[])
ON CONFLICT (job_id) DO UPDATE SET namespace = excluded.namespace, agent_id = excluded.agent_id,
    attempt = excluded.attempt, taken_at = now();

-- name: ReleaseAgentSlots
-- The slots of a shared transaction's writes whose attempts ended, each
-- handed at once to the most urgent attempt waiting for its agent (the
-- lowest rank among the retry timers of its namespace naming one of its
-- capabilities, due or not; FOR UPDATE SKIP LOCKED: never waits on
-- another transaction). With $4 the committing process dispatches the
-- woken itself: their timers become queued, due after $5 (should it die
-- first, the deadline sweep enqueues them), naming the agent whose slot it
-- is. Without, they come due now, naming the agent, and $2 is notified with
-- $3 on commit, to wake the deadline sweep that dispatches them. It
-- answers the woken attempts.
WITH freed AS (
    DELETE FROM agent_slots WHERE job_id = ANY($1::uuid[]) RETURNING namespace, agent_id
), per_agent AS (
    SELECT namespace, agent_id, count(*) AS n FROM freed GROUP BY namespace, agent_id
), picked AS (
    SELECT w.job_id, p.agent_id FROM per_agent p
    JOIN agents a ON a.namespace = p.namespace AND a.agent_id = p.agent_id
    CROSS JOIN LATERAL (
        SELECT t.job_id FROM job_timers t
        WHERE t.phase = 'retry' AND t.namespace = p.namespace AND t.capability = ANY(a.capabilities)
        ORDER BY t.rank_at, t.job_id
        LIMIT p.n
        FOR UPDATE OF t SKIP LOCKED
    ) w
), woken AS (
    UPDATE job_timers t SET agent_id = picked.agent_id,
        phase = CASE WHEN $4::bool THEN 'queued' ELSE t.phase END,
        due_at = CASE WHEN $4::bool THEN clock_timestamp() + $5::interval ELSE now() END
    FROM picked WHERE t.job_id = picked.job_id
    RETURNING t.job_id, t.attempt, coalesce(t.waiting_since, now()) AS waiting_since, t.agent_id
), notified AS (
    SELECT pg_notify($2, $3) FROM (SELECT 1 FROM woken WHERE NOT $4::bool LIMIT 1) AS any_woken
)
SELECT w.job_id::text, w.attempt, w.waiting_since, w.agent_id FROM woken w, (SELECT count(*) FROM notified) AS n;

-- name: WakeNewWaitersIfFree
-- The waits for a slot that submits of this transaction ($1) began because
-- every agent that could take them looked full in the registry's
-- snapshot, though some have slots free by the exact count (the slots
-- held, and those handed to woken waiters): the free slots of the agents
-- serving a capability are dealt out to its waiters, the most urgent
-- first, an agent's first free slot before any agent's second, and those
-- waiters are woken as ReleaseAgentSlots wakes (with $4 queued, due after
-- $5; without, due now, notifying $2 with $3), and answered.
WITH waits AS (
    SELECT t.job_id, t.namespace, t.capability, t.rank_at FROM job_timers t
    WHERE t.job_id = ANY($1::uuid[]) AND t.phase = 'retry' AND t.capability IS NOT NULL
), free AS (
    SELECT a.namespace, a.agent_id, a.capabilities, a.max_concurrent
        - (SELECT count(*) FROM agent_slots s WHERE s.namespace = a.namespace AND s.agent_id = a.agent_id)
        - (SELECT count(*) FROM job_timers o WHERE o.namespace = a.namespace AND o.agent_id = a.agent_id
              AND o.capability IS NOT NULL AND (o.phase = 'queued' OR (o.phase = 'retry' AND o.due_at <= now()))) AS n
    FROM agents a
    WHERE a.max_concurrent > 0 AND a.state NOT IN ('PROBING', 'DOWN', 'DRAINING', 'OFFLINE') AND (a.paused_until IS NULL OR a.paused_until <= now())
        AND EXISTS (SELECT 1 FROM waits w WHERE w.namespace = a.namespace AND w.capability = ANY(a.capabilities))
), offered AS (
    SELECT f.namespace, c.capability, f.agent_id,
        row_number() OVER (PARTITION BY f.namespace, c.capability ORDER BY g.i, f.agent_id) AS k
    FROM free f CROSS JOIN LATERAL generate_series(1, f.n) AS g(i) CROSS JOIN LATERAL unnest(f.capabilities) AS c(capability)
    WHERE EXISTS (SELECT 1 FROM waits w WHERE w.namespace = f.namespace AND w.capability = c.capability)
), picked AS (
    SELECT w.job_id, o.agent_id FROM (
        SELECT w.*, row_number() OVER (PARTITION BY w.namespace, w.capability ORDER BY w.rank_at, w.job_id) AS k FROM waits w
    ) w JOIN offered o ON o.namespace = w.namespace AND o.capability = w.capability AND o.k = w.k
), woken AS (
    UPDATE job_timers t SET agent_id = p.agent_id,
        phase = CASE WHEN $4::bool THEN 'queued' ELSE t.phase END,
        due_at = CASE WHEN $4::bool THEN clock_timestamp() + $5::interval ELSE now() END
    FROM picked p WHERE t.job_id = p.job_id
    RETURNING t.job_id, t.attempt, coalesce(t.waiting_since, now()) AS waiting_since, t.agent_id
), notified AS (
    SELECT pg_notify($2, $3) FROM (SELECT 1 FROM woken WHERE NOT $4::bool LIMIT 1) AS any_woken
)
SELECT w.job_id::text, w.attempt, w.waiting_since, w.agent_id FROM woken w, (SELECT count(*) FROM notified) AS n;

-- name: PauseAgents
-- Pauses agents ($1[i] namespace, $2[i] agent) until $3[i] (a later pause
-- wins), and tells every process's registry snapshot on $4 at commit.
WITH paused AS (
    UPDATE agents a SET paused_until = greatest(a.paused_until, p.until)
    FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS p(namespace, agent_id, until)
    WHERE a.namespace = p.namespace AND a.agent_id = p.agent_id
    RETURNING 1
)
SELECT pg_notify($4, '') FROM (SELECT 1 FROM paused LIMIT 1) AS any_paused;

-- name: LockOrderingKeys
-- Takes the advisory locks of ordering keys ($1[i] namespace, $2[i] key),
-- in one order: whoever adds a job to a key's queue or takes one off holds
-- it, so no two decide on the same queue.
SELECT pg_advisory_xact_lock(h) FROM (
    SELECT DISTINCT hashtextextended(n || '/' || k, 1) AS h FROM unnest($1::text[], $2::text[]) AS u(n, k)
) AS keys ORDER BY h;

-- name: OrderQueueLength
-- How many jobs are in namespace $1's queue of ordering key $2 (its lock held).
SELECT count(*)::int FROM ordered_jobs WHERE namespace = $1 AND ordering_key = $2;

-- name: EnterOrders
-- Puts jobs ($1[i] namespace, $2[i] key, $3[i] job) at the back of their
-- keys' queues, in the order given (the keys' locks held).
INSERT INTO ordered_jobs (namespace, ordering_key, job_id)
SELECT n, k, j FROM unnest($1::text[], $2::text[], $3::uuid[]) WITH ORDINALITY AS u(n, k, j, i) ORDER BY i;

-- name: OrderAhead
-- How many jobs are ahead of job $1 in its ordering key's queue.
SELECT count(*)::int FROM ordered_jobs o JOIN ordered_jobs me
    ON me.job_id = $1 AND o.namespace = me.namespace AND o.ordering_key = me.ordering_key AND o.seq < me.seq;

-- name: LockOrderingKeysOfJobs
-- LockOrderingKeys for the keys of jobs $1.
SELECT pg_advisory_xact_lock(h) FROM (
    SELECT DISTINCT hashtextextended(namespace || '/' || ordering_key, 1) AS h FROM ordered_jobs WHERE job_id = ANY($1::uuid[])
) AS keys ORDER BY h;

-- name: LeaveOrder
-- Takes jobs $1, which ended, off their keys' queues (the keys' locks
-- held) and makes the next job of each key due at once if it waits for its
-- turn; $2 is notified with $3 on commit, to wake the deadline sweep.
WITH gone AS (
    DELETE FROM ordered_jobs WHERE job_id = ANY($1::uuid[]) RETURNING namespace, ordering_key
), heads AS (
    SELECT DISTINCT ON (o.namespace, o.ordering_key) o.job_id FROM ordered_jobs o
    JOIN (SELECT DISTINCT namespace, ordering_key FROM gone) g USING (namespace, ordering_key)
    WHERE o.job_id <> ALL($1::uuid[])
    ORDER BY o.namespace, o.ordering_key, o.seq
), woken AS (
    UPDATE job_timers t SET phase = 'retry', due_at = now() FROM heads
    WHERE t.job_id = heads.job_id AND t.phase = 'ordered' RETURNING 1
)
SELECT pg_notify($2, $3) FROM (SELECT 1 FROM woken LIMIT 1) AS any_woken;
