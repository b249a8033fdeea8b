/**
 * The caller's side: submit jobs by capability or intent, follow them
 * (`wait_ms` long-polls), cancel and replay them, resolve intents (brokered);
 * or look a capability's agents up and call the best one directly (lookup
 * mode: {@link Client.lookup}, {@link Client.invoke}, {@link Client.report}).
 */

import { AgentReachError, APIError, WaitTimeout } from "./errors.js";
import { Transport, envKey, envUrl, sleep, unreachable, type FetchLike } from "./transport.js";
import { isTerminal, type Job, type JobEvent, type Resolution, type SubmitRequest, type Submitted } from "./types.js";
import {
  CallMemory,
  LookupCache,
  MAX_AGENT_ANSWER,
  NoCandidates,
  REPORT_WINDOW_MS,
  ReportQueue,
  newKey,
  question,
  reportBody,
  traceOf,
  uuid7,
  type Attempt,
  type Candidate,
  type DirectReport,
  type InvokeResult,
  type LookupOptions,
  type LookupResult,
} from "./direct.js";
import { GRANT_HEADER } from "./grant.js";
import { randomBytes } from "node:crypto";

/** Options of a {@link Client}. */
export interface ClientOptions {
  /** The service's base URL (default `AGENTREACH_URL`, else http://127.0.0.1:8080). */
  url?: string;
  /** A key with the scopes the calls need (default `AGENTREACH_KEY`). */
  apiKey?: string;
  /** The namespace submits, lookups and lists name when they name none. */
  namespace?: string;
  /** Milliseconds one HTTP request may take (default 30 s). */
  timeoutMs?: number;
  /** How often a call that can safely be repeated is tried again (default 3). */
  maxRetries?: number;
  /** The `fetch` to call the service with (default the platform's). */
  fetch?: FetchLike;
  /** The `fetch` to call agents directly with (never one that adds the API key). */
  agentFetch?: FetchLike;
  /** How many lookup answers to keep (0: never serve one from memory). */
  cacheSize?: number;
  /** The longest one candidate of `invoke` has to answer (ms, default 30 s); once ten calls of a capability answered, 3 × their p99 (at least 1 s) when that is shorter. */
  candidateTimeoutMs?: number;
  /** How long a candidate `invoke` could not reach, or that did not answer in time, is tried after every other one (ms, default 30 s; 0: never). */
  quarantineMs?: number;
  /** Reports are sent when this many are pending (default 100)... */
  reportBatch?: number;
  /** ...or every this many ms (default 1 s), and at `flush()` and `close()`. */
  reportIntervalMs?: number;
}

/** What a submit may say besides the capability and the payload. */
export type SubmitOptions = Omit<SubmitRequest, "capability" | "payload" | "wait_ms"> & {
  /** The same key with the same body answers the same job for 24 h; one is made when missing, so retries never submit twice. */
  idempotencyKey?: string;
};

/** Options of {@link Client.wait}. */
export interface WaitOptions {
  /** Give up after this many ms (default 60 s; `null`: never). */
  timeoutMs?: number | null;
  /** The first poll interval when the service does not hold reads (ms, default 100). */
  pollMs?: number;
  /** The longest poll interval (ms, default 1 s). */
  maxPollMs?: number;
  /** Ask the service to hold each read until the job ends (`wait_ms`; default true); false polls. */
  longPoll?: boolean;
}

/** Options of {@link Client.run}. */
export type RunOptions = SubmitOptions & WaitOptions;

/** Options of {@link Client.invoke}. */
export interface InvokeOptions extends LookupOptions {
  /** Milliseconds each candidate has (default: what the client learned, at most `candidateTimeoutMs`). */
  timeoutMs?: number;
  /** The W3C trace context to continue. */
  traceparent?: string;
  /**
   * Races a candidate that has not answered within this many ms with the
   * next one (one more each `hedgeMs`): the first result wins and the
   * calls still running are aborted. Only for an idempotent capability:
   * two agents may both do the work. Unset: one candidate at a time.
   */
  hedgeMs?: number;
}

/** An agent's inline answer to a direct call. */
type Answer = { status?: string; result?: unknown; biz_code?: string };

/** What every call of one invocation shares. */
interface Invocation {
  capability: string;
  payloadJson: string;
  invocationId: string;
  traceId: string;
  flags: string;
  timeoutMs: number;
}

/** One candidate's call, done: its index in the race, what happened, and the answer of one that answered a result. */
interface Called {
  i: number;
  cand: Candidate;
  attempt: Attempt;
  answer?: Answer;
}

/** How long one read of `wait()` or `run()` asks the service to hold it. */
const LONG_POLL_MS = 20_000;

function jobPath(jobId: string, tail = ""): string {
  return "/v1/jobs/" + encodeURIComponent(jobId) + tail;
}

/** The service refused the wait itself: a key at its bound of waits, or a service older than `wait_ms`. */
function waitRefused(err: unknown): boolean {
  return err instanceof APIError && (err.code === "rate_limited" || (err.code === "invalid_argument" && err.field === "wait_ms"));
}

function clean<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null && v !== "")) as Partial<T>;
}

/** A caller of Agent-Reach. Close it (`await client.close()`) to send the reports still pending. */
export class Client {
  readonly url: string;
  readonly namespace?: string;
  /** What `invoke` remembers of earlier calls (latencies, quarantined candidates). */
  readonly memory: CallMemory;
  private readonly key?: string;
  private readonly t: Transport;
  private readonly agentFetch: FetchLike;
  private readonly cache: LookupCache;
  private readonly reports: ReportQueue;
  private readonly flights = new Map<string, Promise<[unknown, number]>>();
  private readonly candidateTimeoutMs: number;
  private readonly reportIntervalMs: number;
  private reportTimer?: NodeJS.Timeout;
  private sending?: Promise<void>;
  private closed = false;

  constructor(opts: ClientOptions = {}) {
    this.url = envUrl(opts.url);
    this.key = envKey(opts.apiKey);
    this.namespace = opts.namespace;
    this.t = new Transport(this.url, { timeoutMs: opts.timeoutMs, maxRetries: opts.maxRetries, fetch: opts.fetch });
    this.agentFetch = opts.agentFetch ?? ((i, init) => globalThis.fetch(i, init));
    this.cache = new LookupCache(opts.cacheSize ?? 256);
    this.reports = new ReportQueue(opts.reportBatch ?? 100);
    this.memory = new CallMemory(opts.quarantineMs ?? 30_000);
    this.candidateTimeoutMs = opts.candidateTimeoutMs ?? 30_000;
    this.reportIntervalMs = opts.reportIntervalMs ?? 1000;
  }

  /** Never shows the key. */
  toString(): string {
    return `Client(${this.url}${this.namespace ? ", " + this.namespace : ""})`;
  }

  // --- brokered ---------------------------------------------------------

  private submitBody(capability: string, payload: unknown, o: SubmitOptions): Record<string, unknown> {
    const { idempotencyKey: _ik, ...rest } = o;
    const body: Record<string, unknown> = { payload, ...clean(rest as Record<string, unknown>) };
    if (capability) body.capability = capability;
    if (body.namespace === undefined && this.namespace) body.namespace = this.namespace;
    return body;
  }

  /**
   * Submits a job; answers once it is committed (`SUBMITTED`). With `intent`
   * (the caller's words) and `capability` "", the service resolves the intent
   * to a capability of the namespace's catalogue first.
   */
  async submit(capability: string, payload: unknown, opts: SubmitOptions = {}): Promise<Submitted> {
    return this.t.call<Submitted>({
      method: "POST",
      path: "/v1/jobs",
      json: this.submitBody(capability, payload, opts),
      headers: { "Idempotency-Key": opts.idempotencyKey || newKey() },
      bearer: this.key,
      idempotent: true,
    });
  }

  /** Submits a job by intent: `submit("", payload, {intent})`. */
  async submitIntent(intent: string, payload: unknown, opts: SubmitOptions = {}): Promise<Submitted> {
    return this.submit("", payload, { ...opts, intent });
  }

  /**
   * Submits a job and answers it once it has ended. The submit itself waits
   * for the end (`wait_ms`), so a job that ends within 20 s comes back in one
   * round trip (200); a longer one (202) is waited for with {@link wait}. A
   * service that refuses the wait (429, or 400 on `wait_ms`) gets the same
   * submit (same Idempotency-Key) without it, then polls.
   */
  async run(capability: string, payload: unknown, opts: RunOptions = {}): Promise<Job> {
    const { timeoutMs = 60_000, pollMs, maxPollMs, longPoll, ...submit } = opts;
    const end = timeoutMs === null ? undefined : Date.now() + timeoutMs;
    const ik = submit.idempotencyKey || newKey();
    const hold = end === undefined ? LONG_POLL_MS : Math.max(0, Math.min(LONG_POLL_MS, end - Date.now()));
    let jobId: string;
    let refused = false;
    try {
      const ans = await this.t.send<Job & Submitted>({
        method: "POST",
        path: "/v1/jobs",
        json: { ...this.submitBody(capability, payload, submit), wait_ms: Math.floor(hold) },
        headers: { "Idempotency-Key": ik },
        bearer: this.key,
        idempotent: true,
        timeoutMs: hold + 10_000,
        passRateLimit: true,
      });
      if (ans.status === 200 && isTerminal(ans.body)) return ans.body as Job;
      jobId = ans.body.job_id;
    } catch (err) {
      if (!waitRefused(err)) throw err;
      refused = true; // the key holds as many waits as the service allows, or the service has no wait_ms: poll
      jobId = (await this.submit(capability, payload, { ...submit, idempotencyKey: ik })).job_id;
    }
    const left = end === undefined ? null : Math.max(0, end - Date.now());
    return this.wait(jobId, { timeoutMs: left, pollMs, maxPollMs, longPoll: refused ? false : longPoll });
  }

  /** Runs a job by intent: `run("", payload, {intent})`. */
  async runIntent(intent: string, payload: unknown, opts: RunOptions = {}): Promise<Job> {
    return this.run("", payload, { ...opts, intent });
  }

  /** The job now (`GET /v1/jobs/{id}`); with `waitMs`, held until it ends or that much time passes. */
  async get(jobId: string, opts: { waitMs?: number } = {}): Promise<Job> {
    return this.t.call<Job>({
      method: "GET",
      path: jobPath(jobId),
      query: { wait_ms: opts.waitMs },
      bearer: this.key,
      idempotent: true,
      timeoutMs: opts.waitMs ? opts.waitMs + 10_000 : undefined,
      passRateLimit: Boolean(opts.waitMs),
    });
  }

  /**
   * Answers the job once it is terminal. Each read asks the service to hold it
   * until the job ends (`wait_ms`, 20 s a read); a service that refuses the
   * wait is polled. Throws {@link WaitTimeout} when `timeoutMs` passes first.
   */
  async wait(jobId: string, opts: WaitOptions = {}): Promise<Job> {
    const timeoutMs = opts.timeoutMs === undefined ? 60_000 : opts.timeoutMs;
    const end = timeoutMs === null ? undefined : Date.now() + timeoutMs;
    let poll = opts.pollMs ?? 100;
    const maxPoll = opts.maxPollMs ?? 1000;
    let polling = opts.longPoll === false;
    for (;;) {
      const began = Date.now();
      const hold = polling ? 0 : end === undefined ? LONG_POLL_MS : Math.max(0, Math.min(LONG_POLL_MS, end - began));
      let job: Job;
      try {
        job = await this.get(jobId, { waitMs: hold > 0 ? Math.floor(hold) : undefined });
      } catch (err) {
        if (hold > 0 && waitRefused(err)) {
          polling = true;
          continue;
        }
        throw err;
      }
      if (isTerminal(job)) return job;
      const now = Date.now();
      if (end !== undefined && now >= end) throw new WaitTimeout(`job ${jobId} is still ${job.status} after ${timeoutMs} ms`, job);
      if (!polling && now - began >= hold / 2) continue; // the service held the read: ask again at once
      await sleep(end === undefined ? poll : Math.min(poll, end - now));
      poll = Math.min(poll * 1.5, maxPoll);
    }
  }

  /** The job's audit trail, in order. */
  async events(jobId: string): Promise<JobEvent[]> {
    const body = await this.t.call<{ events?: JobEvent[] }>({ method: "GET", path: jobPath(jobId, "/events"), bearer: this.key, idempotent: true });
    return body?.events ?? [];
  }

  /** Cancels a job that is not terminal (a terminal one: `conflict`). */
  async cancel(jobId: string, reason?: string): Promise<Job> {
    return this.t.call<Job>({ method: "POST", path: jobPath(jobId, "/cancel"), json: reason ? { reason } : {}, bearer: this.key });
  }

  /** Submits a dead-lettered job again, as a new job with `replay_of`. */
  async replay(jobId: string): Promise<Submitted> {
    return this.t.call<Submitted>({ method: "POST", path: jobPath(jobId, "/replay"), json: {}, bearer: this.key });
  }

  /** One page of jobs, newest first; pass `next_cursor` on for the next. */
  async list(q: { status?: string; capability?: string; agent_id?: string; namespace?: string; limit?: number; cursor?: string } = {}): Promise<{ jobs: Job[]; next_cursor?: string }> {
    return this.t.call({ method: "GET", path: "/v1/jobs", query: { ...q, namespace: q.namespace ?? this.namespace }, bearer: this.key, idempotent: true });
  }

  /**
   * Resolves an intent to a capability of the namespace's catalogue, and says
   * why: `capability`, `resolver`, `confidence` against `threshold`, `reason`,
   * `candidates` and every resolver's `steps`. Throws an {@link APIError} with
   * code `ambiguous_intent` (422, with `suggestions`) when no resolver is confident.
   */
  async resolve(intent: string, opts: { namespace?: string } = {}): Promise<Resolution> {
    return this.t.call<Resolution>({
      method: "POST",
      path: "/v1/resolve",
      json: clean({ intent, namespace: opts.namespace ?? this.namespace }),
      bearer: this.key,
      idempotent: true,
    });
  }

  /** The secrets that sign the namespace's callbacks, current first (an admin key). */
  async callbackSecrets(namespace?: string): Promise<string[]> {
    const body = await this.t.call<{ secret?: string; secrets?: string[] }>({
      method: "GET",
      path: "/v1/callbacks/secret",
      query: { namespace: namespace ?? this.namespace },
      bearer: this.key,
      idempotent: true,
    });
    const out = (body?.secrets ?? []).filter((s) => typeof s === "string");
    return out.length ? out : body?.secret ? [body.secret] : [];
  }

  // --- lookup mode ------------------------------------------------------

  /**
   * The ranked candidates for `capability` to call directly (`POST /v1/lookup`),
   * each with an invocation grant. From memory while the answer is fresh (its
   * `ttl_ms`, capped by the earliest grant's expiry); concurrent lookups of the
   * same question make one request; when the registry is unreachable, the last
   * list known is answered with `stale` set.
   */
  async lookup(capability: string, opts: LookupOptions = {}): Promise<LookupResult> {
    const q = question(capability, { ...opts, namespace: opts.namespace ?? this.namespace });
    if (!opts.noCache) {
      const hit = this.cache.fresh(q.key);
      if (hit) return hit;
    }
    let flight = this.flights.get(q.key);
    if (!flight) {
      flight = (async (): Promise<[unknown, number]> => {
        const ans = await this.t.call<{ candidates?: Candidate[]; ttl_ms?: number; watch_from?: number }>({
          method: "POST",
          path: "/v1/lookup",
          json: q.body,
          bearer: this.key,
          idempotent: true,
          timeoutMs: 5000,
        });
        const fetched = Date.now();
        this.cache.store(q.key, ans ?? {}, fetched);
        return [ans, fetched];
      })();
      this.flights.set(q.key, flight);
      const done = () => {
        if (this.flights.get(q.key) === flight) this.flights.delete(q.key);
      };
      flight.then(done, done);
    }
    try {
      const [ans, fetchedAt] = await flight;
      const m = (ans ?? {}) as { candidates?: Candidate[]; ttl_ms?: number; watch_from?: number };
      return { candidates: m.candidates ?? [], ttlMs: m.ttl_ms ?? 0, fetchedAt, cached: false, stale: false, watchFrom: m.watch_from ?? 0 };
    } catch (err) {
      if (unreachable(err)) {
        const st = this.cache.stale(q.key);
        if (st) return st;
      }
      throw err;
    }
  }

  /**
   * Looks `capability` up and calls the best candidate directly with its grant,
   * failing over to the next on a connection error, a timeout, a 5xx or any
   * answer that is not a result; a candidate that could not be reached or did
   * not answer in time is quarantined (tried last) for `quarantineMs`. Each
   * call's outcome is reported (`POST /v1/reports`) in the background. A
   * FAILED the agent answered is a result: it is answered, not failed over.
   * Throws {@link NoCandidates} when no candidate answered one.
   */
  async invoke(capability: string, payload: unknown, opts: InvokeOptions = {}): Promise<InvokeResult> {
    const payloadJson = JSON.stringify(payload);
    if (payloadJson === undefined) throw new TypeError("the payload is not JSON");
    const constraints = { ...(opts.constraints ?? {}) };
    if (constraints.protocol && constraints.protocol !== "http") throw new TypeError(`invoke speaks http, not ${constraints.protocol}`);
    constraints.protocol = "http";
    const res = await this.lookup(capability, { ...opts, constraints });
    const timeoutMs = opts.timeoutMs ?? this.memory.timeout(capability, this.candidateTimeoutMs);
    const invocationId = uuid7();
    const [traceId, flags] = traceOf(opts.traceparent);
    const reportable = Date.now() - res.fetchedAt < REPORT_WINDOW_MS;
    const attempts: Attempt[] = [];
    const cands = this.memory.order(res.candidates).filter((c) => (c.protocol === "" || c.protocol === "http") && !!c.endpoint);
    const race = new AbortController(); // the calls still running once one answered
    const running = new Map<number, Promise<Called>>();
    let next = 0;
    const start = () => {
      const i = next++;
      running.set(i, this.callCandidate(cands[i], i + 1, { capability, payloadJson, invocationId, traceId, flags, timeoutMs }, race.signal).then((c) => ({ ...c, i })));
    };
    try {
      if (cands.length) start();
      while (running.size) {
        let timer: NodeJS.Timeout | undefined;
        const hedge =
          opts.hedgeMs && opts.hedgeMs > 0 && next < cands.length
            ? new Promise<"hedge">((resolve) => (timer = setTimeout(() => resolve("hedge"), opts.hedgeMs)))
            : new Promise<never>(() => {});
        const done = await Promise.race([...running.values(), hedge]);
        clearTimeout(timer);
        if (done === "hedge") {
          start();
          continue;
        }
        running.delete(done.i);
        const { cand, attempt, answer } = done;
        attempts.push(attempt);
        if (!attempt.reached && attempt.statusCode === 0) this.memory.failed(cand);
        if (reportable && !attempt.grantRefused) {
          this.queueReport({
            agent_id: cand.agent_id,
            capability,
            reached: attempt.reached,
            ok: attempt.statusCode === 0 ? undefined : answer?.status === "SUCCESS",
            latency_ms: attempt.latencyMs,
            biz_code: answer?.biz_code || undefined,
            namespace: cand.namespace,
          });
        }
        if (answer) {
          race.abort();
          this.memory.answered(capability, attempt.latencyMs);
          return {
            status: answer.status as "SUCCESS" | "FAILED",
            result: answer.result,
            biz_code: answer.biz_code || undefined,
            agentId: cand.agent_id,
            namespace: cand.namespace,
            invocationId,
            traceId,
            latencyMs: attempt.latencyMs,
            stale: res.stale,
            attempts,
          };
        }
        if (!running.size && next < cands.length) start();
      }
    } finally {
      race.abort(); // whatever ended the race, no call outlives it
      this.kickReports(false);
    }
    if (!attempts.length) throw new NoCandidates(`invoke ${capability}: the lookup found no agent to call directly`);
    throw new NoCandidates(`invoke ${capability}: no candidate answered: ${attempts.map((a) => `${a.agentId}: ${a.error}`).join("; ")}`, attempts);
  }

  /** One candidate's call of an invocation: what happened, and its answer when it answered a result. */
  private async callCandidate(cand: Candidate, attempt: number, inv: Invocation, race: AbortSignal): Promise<Omit<Called, "i">> {
    const deadline = new Date(Date.now() + inv.timeoutMs).toISOString();
    const body =
      `{"job_id":${JSON.stringify(inv.invocationId)},"attempt":${attempt},"trace_id":${JSON.stringify(inv.traceId)},` +
      `"capability":${JSON.stringify(inv.capability)},"payload":${inv.payloadJson},"deadline":${JSON.stringify(deadline)},"result_url":""}`;
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json",
      [GRANT_HEADER]: cand.grant,
      "X-Reach-Job-Id": inv.invocationId,
      traceparent: `00-${inv.traceId}-${randomBytes(8).toString("hex")}-${inv.flags}`,
    };
    const base = { agentId: cand.agent_id, namespace: cand.namespace, endpoint: cand.endpoint };
    const started = performance.now();
    let status = 0;
    let text = "";
    try {
      const resp = await this.agentFetch(cand.endpoint, { method: "POST", headers, body, signal: AbortSignal.any([AbortSignal.timeout(inv.timeoutMs), race]) });
      status = resp.status;
      text = await readLimited(resp);
    } catch (err) {
      const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
      const error =
        e?.name === "TimeoutError" || e?.name === "AbortError"
          ? `no answer within ${inv.timeoutMs} ms`
          : `${e?.cause?.code ?? e?.name ?? "Error"}: ${e?.cause?.message ?? e?.message ?? String(err)}`;
      return { cand, attempt: { ...base, reached: false, statusCode: 0, latencyMs: performance.now() - started, error } };
    }
    const latencyMs = performance.now() - started;
    let answer: Answer | undefined;
    let error: string | undefined;
    let refused = false;
    if (status === 401 || status === 403) {
      error = `the agent refused the grant (HTTP ${status}: ${text.slice(0, 200)})`;
      refused = true;
    } else if (status !== 200) {
      error = `answered HTTP ${status}: ${text.slice(0, 200)}`;
    } else {
      try {
        const doc = JSON.parse(text) as { status?: string };
        if (doc && (doc.status === "SUCCESS" || doc.status === "FAILED")) answer = doc;
      } catch {
        /* not a result */
      }
      if (!answer) error = `answered 200 without a SUCCESS or FAILED result: ${text.slice(0, 200)}`;
    }
    return { cand, attempt: { ...base, reached: !!answer, statusCode: status, latencyMs, error, grantRefused: refused }, answer };
  }

  private queueReport(r: DirectReport): void {
    this.reports.add([{ ...r, at: r.at ?? new Date().toISOString() }]);
  }

  /** Queues outcome reports of direct calls the application made itself; they are sent in the background. */
  report(...reports: DirectReport[]): void {
    for (const r of reports) this.queueReport(r);
    this.kickReports(false);
  }

  private kickReports(now: boolean): void {
    if (this.closed || !this.reports.length) return;
    if (now || this.reports.length >= this.reports.batch) {
      void this.flush().catch(() => undefined);
      return;
    }
    if (!this.reportTimer) {
      this.reportTimer = setTimeout(() => {
        this.reportTimer = undefined;
        void this.flush().catch(() => undefined);
      }, this.reportIntervalMs);
      this.reportTimer.unref();
    }
  }

  /** Sends every report pending now; throws when a batch could not be sent (it is kept for later when the service was unreachable). */
  async flush(): Promise<void> {
    while (this.sending) await this.sending.catch(() => undefined);
    const run = (async () => {
      for (;;) {
        let batch = this.reports.take();
        if (!batch.length) return;
        for (;;) {
          try {
            await this.t.call({ method: "POST", path: "/v1/reports", json: reportBody(batch), bearer: this.key });
            break;
          } catch (err) {
            const m = err instanceof APIError && err.code === "invalid_argument" ? /^reports\[(\d+)\]/.exec(err.field ?? "") : null;
            if (m && Number(m[1]) < batch.length) {
              batch = batch.filter((_, i) => i !== Number(m[1]));
              if (!batch.length) break;
              continue;
            }
            if (unreachable(err) || (err instanceof APIError && err.status === 429)) this.reports.requeue(batch);
            throw err;
          }
        }
      }
    })();
    this.sending = run;
    try {
      await run;
    } finally {
      if (this.sending === run) this.sending = undefined;
    }
  }

  /** Sends the reports still pending and stops the report timer. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.reportTimer) clearTimeout(this.reportTimer);
    try {
      await this.flush();
    } catch {
      /* reports that cannot be sent at close are dropped */
    }
  }
}

async function readLimited(resp: Response): Promise<string> {
  if (!resp.body) return "";
  const chunks: Uint8Array[] = [];
  let n = 0;
  for await (const chunk of resp.body as unknown as AsyncIterable<Uint8Array>) {
    n += chunk.byteLength;
    if (n > MAX_AGENT_ANSWER) throw new Error(`answered more than ${MAX_AGENT_ANSWER >> 20} MiB`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

