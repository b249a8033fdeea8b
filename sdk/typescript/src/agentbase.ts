/**
 * What push agents and pull workers share: handlers, registration,
 * heartbeats on the interval the registry answers, running a job within its
 * deadline (extending it for a long handler), and reporting results.
 */

import { AgentReachError, APIError, Refused, RegistrationError, TransportError } from "./errors.js";
import { Transport, envKey, envUrl, sleep, within, type FetchLike } from "./transport.js";
import { asResult, type CapabilityDoc, type Delivery, type Result } from "./types.js";
import { JobContext, type CancelReason, type Handler } from "./context.js";

/** Options every agent takes. */
export interface AgentOptions {
  /** The agent's id in its namespace. */
  agentId: string;
  /** Agent-Reach's base URL (default `AGENTREACH_URL`, else http://127.0.0.1:8080). */
  url?: string;
  /** A key with `agents:write` (default `AGENTREACH_KEY`); heartbeats and results use the agent's own token. */
  apiKey?: string;
  namespace?: string;
  /** Capabilities to register besides those of the handlers. */
  capabilities?: string[];
  aliases?: string[];
  version?: string;
  weight?: number;
  /** The most attempts the agent takes at once (the registry holds to it). */
  maxConcurrent?: number;
  rolloutPercent?: number;
  /** The lease (5-3600 s, default the service's 30). */
  ttlSeconds?: number;
  context?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  /** What some capabilities do, for the catalogue intent resolution reads: `{"parcel.track": {description, examples}}`. */
  capabilityInfo?: Record<string, CapabilityDoc>;
  /** The longest random wait before registering (ms, default 0), so a fleet restarting together does not stampede the registry. */
  startJitterMs?: number;
  /** How long a shutdown waits for the jobs held (ms, default 30 s). */
  shutdownGraceMs?: number;
  /** Milliseconds one request to the service may take (default 10 s). */
  timeoutMs?: number;
  /** The `fetch` to call the service with. */
  fetch?: FetchLike;
  /** Called with errors the agent logs (default `console.warn`). */
  onError?: (message: string, err?: unknown) => void;
}

/** How a handler ended. @internal */
export interface Outcome {
  kind: "result" | "refused" | "error" | "ended";
  result?: Result;
  error?: unknown;
}

/** A handler and how it answers. @internal */
export interface Route {
  handler: Handler;
  accept: boolean;
}

/** The base of {@link Agent} and {@link Worker}. */
export abstract class AgentBase {
  readonly agentId: string;
  readonly url: string;
  readonly namespace?: string;
  readonly maxConcurrent?: number;
  /** How many heartbeats the registry answered. */
  heartbeats = 0;
  protected abstract readonly mode: "push" | "pull";
  protected readonly opts: AgentOptions;
  protected readonly t: Transport;
  protected readonly key?: string;
  protected token = "";
  protected previousToken = "";
  protected intervalMs = 10_000;
  protected readonly jobs = new Map<string, JobContext>();
  protected started = false;
  protected stopping = false;
  protected fatal?: Error;
  private readonly routes = new Map<string, Route>();
  private fallback?: Route;
  private life?: Promise<void>;
  private lifeStop = new AbortController();
  private wake = new AbortController();
  private registeredWaiters: (() => void)[] = [];
  private idleWaiters: (() => void)[] = [];

  constructor(opts: AgentOptions) {
    if (!opts.agentId) throw new TypeError("agentId is required");
    this.opts = opts;
    this.agentId = opts.agentId;
    this.url = envUrl(opts.url);
    this.key = envKey(opts.apiKey);
    this.namespace = opts.namespace;
    this.maxConcurrent = opts.maxConcurrent;
    this.t = new Transport(this.url, { timeoutMs: opts.timeoutMs ?? 10_000, maxRetries: 2, fetch: opts.fetch });
  }

  /** Never shows the key or the token. */
  toString(): string {
    return `${this.constructor.name}(${this.agentId}, ${this.url})`;
  }

  // --- handlers ---------------------------------------------------------

  /**
   * Serves `capability` with `fn` (`null`: every capability). With
   * `accept: true` a push agent answers `202` at once and posts the result
   * when the handler returns, so long work holds no connection open.
   */
  handle(capability: string | null, fn: Handler, opts: { accept?: boolean } = {}): this {
    if (this.started) throw new Error("handlers are added before the agent starts");
    const route = { handler: fn, accept: opts.accept ?? false };
    if (capability === null) this.fallback = route;
    else this.routes.set(capability, route);
    return this;
  }

  /** What the agent registers: the capabilities given and its handlers'. */
  get capabilities(): string[] {
    const out = [...(this.opts.capabilities ?? [])];
    for (const c of this.routes.keys()) if (!out.includes(c)) out.push(c);
    return out;
  }

  protected route(capability: string): Route | undefined {
    return this.routes.get(capability) ?? this.fallback;
  }

  // --- state ------------------------------------------------------------

  /** How many attempts the agent holds now. */
  get inFlight(): number {
    return this.jobs.size;
  }

  /** The heartbeat interval (ms): the one the registry answered, else 10 s. */
  get heartbeatIntervalMs(): number {
    return this.intervalMs;
  }

  /** Whether the agent holds a token from the registry now. */
  get registered(): boolean {
    return this.token !== "";
  }

  /** The tokens deliveries may be signed for: the current one and the one before a re-registration. */
  signingTokens(): string[] {
    return [this.token, this.previousToken].filter(Boolean);
  }

  /** Waits for the first registration; throws its error if the registry refused the agent. */
  async waitRegistered(timeoutMs = 30_000): Promise<void> {
    if (!this.started) throw new Error("the agent is not started");
    if (!this.token && !this.fatal) {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${this.agentId} did not register within ${timeoutMs} ms`)), timeoutMs);
        this.registeredWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    if (this.fatal) throw this.fatal;
  }

  // --- life -------------------------------------------------------------

  protected registration(): Record<string, unknown> {
    const o = this.opts;
    const body: Record<string, unknown> = { agent_id: this.agentId, capabilities: this.capabilities, mode: this.mode };
    const opt: Record<string, unknown> = {
      namespace: o.namespace,
      aliases: o.aliases?.length ? o.aliases : undefined,
      version: o.version,
      weight: o.weight,
      max_concurrent: this.maxConcurrent,
      rollout_percent: o.rolloutPercent,
      ttl_seconds: o.ttlSeconds,
      context: o.context,
      metadata: o.metadata && Object.keys(o.metadata).length ? o.metadata : undefined,
      capability_info: o.capabilityInfo,
    };
    for (const [k, v] of Object.entries(opt)) if (v !== undefined) body[k] = v;
    return body;
  }

  protected path(tail: string): string {
    return "/v1/agents/" + encodeURIComponent(this.agentId) + tail;
  }

  protected get query(): Record<string, string | undefined> {
    return { namespace: this.namespace };
  }

  protected log(message: string, err?: unknown): void {
    (this.opts.onError ?? ((m: string) => console.warn(`agentreach: ${m}`)))(message, err);
  }

  /** Starts registering and heartbeating; answers at once. */
  protected open(): void {
    if (this.started) throw new Error("the agent is already started");
    if (!this.capabilities.length) throw new TypeError("the agent serves no capability: add a handler or pass capabilities");
    if (!this.fallback && !this.routes.size) throw new TypeError("the agent has no handler");
    this.started = true;
    this.life = this.runLife().catch((err) => this.log("the agent's life loop failed", err));
  }

  private async runLife(): Promise<void> {
    const stop = this.lifeStop.signal;
    try {
      const jitter = this.opts.startJitterMs ?? 0;
      if (jitter > 0) await sleep(Math.random() * jitter, stop);
      while (!this.stopping) {
        if (!this.token) {
          await this.registerUntilDone(stop);
          continue;
        }
        try {
          await sleep(this.intervalMs, AbortSignal.any([stop, this.wake.signal]));
        } catch {
          if (stop.aborted) return;
          this.wake = new AbortController();
        }
        if (this.stopping) return;
        if (this.token) await this.heartbeat();
      }
    } catch (err) {
      if (stop.aborted) return;
      if (err instanceof RegistrationError) {
        this.log(err.message);
        this.fatal = err;
        this.notifyRegistered();
        this.onFatal(err);
        return;
      }
      throw err;
    }
  }

  /** A subclass stops what it runs when registration failed for good. */
  protected onFatal(_err: Error): void {}

  private notifyRegistered(): void {
    const w = this.registeredWaiters;
    this.registeredWaiters = [];
    for (const f of w) f();
  }

  /** Makes the life loop register again at once (the registry forgot the agent). */
  protected forget(): void {
    this.dropToken();
    this.wake.abort();
  }

  /** Forgets the token, keeping it as the previous one: deliveries signed for it still verify. */
  private dropToken(): void {
    if (this.token) this.previousToken = this.token;
    this.token = "";
  }

  private async registerUntilDone(stop: AbortSignal): Promise<void> {
    let backoff = 200;
    while (!this.stopping) {
      try {
        await this.register();
        return;
      } catch (err) {
        if (err instanceof APIError && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429) {
          throw new RegistrationError(`registering agent ${this.agentId} at ${this.url}: ${err.message}`, err);
        }
        if (!(err instanceof AgentReachError)) throw err;
        this.log(`registering ${this.agentId}: ${err.message} (again in ${backoff} ms)`);
        await sleep(backoff * (0.5 + Math.random()), stop);
        backoff = Math.min(backoff * 2, 10_000);
      }
    }
  }

  private async register(): Promise<void> {
    const resp = await this.t.call<{ token?: string; heartbeat_interval_ms?: number }>({
      method: "POST",
      path: "/v1/agents",
      json: this.registration(),
      bearer: this.key,
      idempotent: true,
    });
    if (!resp?.token) throw new TransportError("the registry answered a registration without a token");
    if (this.token) this.previousToken = this.token;
    this.token = resp.token;
    this.setInterval(resp);
    this.notifyRegistered();
  }

  private setInterval(resp: { heartbeat_interval_ms?: number } | undefined): void {
    const every = resp?.heartbeat_interval_ms;
    if (typeof every === "number" && every > 0) this.intervalMs = every;
  }

  /** The health figures of the next heartbeat. */
  healthReport(): Record<string, unknown> {
    const n = this.inFlight;
    const out: Record<string, unknown> = { in_flight: n };
    const q = this.queueLength();
    if (q !== undefined) out.queue_length = Math.max(0, q);
    if (this.maxConcurrent) out.pool_usage = Math.min(1, n / this.maxConcurrent);
    if (this.opts.context) out.context = this.opts.context;
    return out;
  }

  protected queueLength(): number | undefined {
    return undefined;
  }

  protected async heartbeat(extra: Record<string, unknown> = {}): Promise<void> {
    try {
      const resp = await this.t.call<{ heartbeat_interval_ms?: number; cancelled?: { job_id: string; attempt?: number }[] }>({
        method: "PUT",
        path: this.path("/heartbeat"),
        query: this.query,
        json: { ...this.healthReport(), ...extra },
        bearer: this.token,
        credential: "agent token",
        retries: 0,
      });
      this.heartbeats++;
      this.setInterval(resp);
      for (const c of resp?.cancelled ?? []) if (typeof c?.job_id === "string") this.cancelJob(c.job_id, c.attempt);
    } catch (err) {
      if (err instanceof APIError && (err.status === 404 || err.status === 401)) {
        // The registry forgot us, or another registration replaced our token: register again.
        this.dropToken();
        return;
      }
      this.log(`heartbeat of ${this.agentId}: ${(err as Error).message}`);
    }
  }

  protected async offline(): Promise<void> {
    if (!this.token) return;
    try {
      await this.t.call({
        method: "POST",
        path: this.path("/offline"),
        query: this.query,
        json: { reason: "shutdown" },
        bearer: this.token,
        credential: "agent token",
        retries: 1,
        timeoutMs: 5000,
      });
    } catch (err) {
      this.log(`going offline: ${(err as Error).message}`);
    }
  }

  /** Waits up to `graceMs` for the jobs held to end, then cancels the rest. */
  protected async drain(graceMs: number): Promise<void> {
    if (this.jobs.size) {
      await within(new Promise<void>((r) => this.idleWaiters.push(r)), graceMs);
    }
    for (const ctx of this.jobs.values()) ctx.cancel("shutdown");
  }

  /** Stops heartbeating. */
  protected async closeLife(): Promise<void> {
    this.stopping = true;
    this.lifeStop.abort();
    await this.life;
  }

  // --- running a job ----------------------------------------------------

  protected hold(ctx: JobContext): void {
    this.jobs.set(`${ctx.jobId}/${ctx.attempt}`, ctx);
  }

  protected releaseHold(ctx: JobContext): void {
    this.jobs.delete(`${ctx.jobId}/${ctx.attempt}`);
    if (!this.jobs.size) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const f of w) f();
    }
  }

  /** Ends the context of a job held here (all its attempts without `attempt`); answers whether it held one. */
  cancelJob(jobId: string, attempt?: number, reason: CancelReason = "cancelled"): boolean {
    let hit = false;
    for (const ctx of this.jobs.values()) {
      if (ctx.jobId === jobId && (attempt === undefined || ctx.attempt === attempt)) {
        ctx.cancel(reason);
        hit = true;
      }
    }
    return hit;
  }

  protected newContext(d: Delivery): JobContext {
    const ctx: JobContext = new JobContext(d, (progress, extendMs) => this.progress(ctx.delivery, progress, extendMs));
    return ctx;
  }

  /**
   * Runs the handler within the job's deadline; never throws. With `keep`
   * (Agent-Reach holds the attempt as delivered: a claim, a push answered
   * 202), a handler still running at two thirds of its time is kept: the SDK
   * reports progress extending the deadline by the attempt's whole time again.
   */
  protected async runHandler(route: Route, ctx: JobContext, keep = false): Promise<Outcome> {
    let deadlineTimer: NodeJS.Timeout | undefined;
    const armDeadline = () => {
      if (deadlineTimer) clearTimeout(deadlineTimer);
      const left = ctx.timeLeftMs();
      if (left !== undefined) deadlineTimer = setTimeout(() => ctx.cancel("deadline"), Math.max(0, left));
    };
    armDeadline();
    const keeper = new AbortController();
    const span = ctx.timeLeftMs();
    if (keep && span !== undefined && span > 0) void this.keepAlive(ctx, span, armDeadline, keeper.signal);
    const ended = new Promise<Outcome>((resolve) => {
      if (ctx.signal.aborted) resolve({ kind: "ended" });
      ctx.signal.addEventListener("abort", () => resolve({ kind: "ended" }), { once: true });
    });
    const ran = (async (): Promise<Outcome> => {
      try {
        const value = await route.handler(ctx);
        if (ctx.cancelled) return { kind: "ended" };
        return { kind: "result", result: asResult(value) };
      } catch (err) {
        if (err instanceof Refused) return { kind: "refused", error: err };
        if (ctx.cancelled) return { kind: "ended" };
        this.log(`handler for ${ctx.capability} failed on job ${ctx.jobId}`, err);
        return { kind: "error", error: err };
      }
    })();
    try {
      return await Promise.race([ran, ended]);
    } finally {
      if (deadlineTimer) clearTimeout(deadlineTimer);
      keeper.abort();
    }
  }

  private async keepAlive(ctx: JobContext, spanMs: number, rearm: () => void, stop: AbortSignal): Promise<void> {
    try {
      while (!ctx.cancelled && !stop.aborted) {
        const left = ctx.timeLeftMs();
        if (left === undefined) return;
        await sleep(Math.max(0, left - spanMs / 3), AbortSignal.any([stop, ctx.signal]));
        let deadline: number | undefined;
        try {
          deadline = await this.progress(ctx.delivery, undefined, spanMs);
        } catch (err) {
          if (err instanceof APIError && err.status === 409) {
            ctx.cancel("cancelled"); // the attempt no longer runs at Agent-Reach
            return;
          }
          this.log(`the deadline of long job ${ctx.jobId} was not extended: ${(err as Error).message}`);
          return;
        }
        if (deadline === undefined || stop.aborted) return;
        ctx.delivery = { ...ctx.delivery, deadline };
        rearm();
      }
    } catch {
      /* stopped */
    }
  }

  /**
   * Reports how far the work on an attempt got (`POST /v1/jobs/{id}/progress`),
   * and with `extendMs` makes its deadline now + extendMs when later. Answers
   * the attempt's deadline (ms since the epoch). Throws an `APIError` 409 when
   * the attempt no longer runs.
   */
  async progress(d: Delivery, progress?: unknown, extendMs = 0): Promise<number | undefined> {
    const body: Record<string, unknown> = { attempt: d.attempt, extend_ms: Math.floor(extendMs) };
    if (progress !== undefined) body.progress = progress;
    const resp = await this.t.call<{ deadline?: string }>({
      method: "POST",
      path: "/v1/jobs/" + encodeURIComponent(d.jobId) + "/progress",
      json: body,
      bearer: this.token,
      credential: "agent token",
      retries: 4,
      deadline: d.deadline,
    });
    const at = resp?.deadline ? Date.parse(resp.deadline) : NaN;
    return Number.isNaN(at) ? undefined : at;
  }

  /**
   * Posts the outcome of an attempt to its `result_url` with the agent's token
   * and `traceparent`, retrying (429, 503 after their Retry-After; a lost
   * answer) until the attempt's deadline. Answers how the service recorded it:
   * `outcome`, or `duplicate` for a second result or one after the attempt timed out.
   */
  async report(d: Delivery, result: Result | unknown): Promise<string> {
    const res = asResult(result);
    const headers: Record<string, string> = {};
    const tp = traceHeader(d);
    if (tp) headers.traceparent = tp;
    const url = d.resultUrl || this.url + "/v1/jobs/" + encodeURIComponent(d.jobId) + "/result";
    const resp = await this.t.call<{ recorded?: string }>({
      method: "POST",
      path: url,
      json: { ...res, attempt: d.attempt },
      headers,
      bearer: this.token,
      credential: "agent token",
      idempotent: true,
      retries: 6,
      deadline: d.deadline,
    });
    return typeof resp?.recorded === "string" ? resp.recorded : "outcome";
  }

  protected async reportQuietly(ctx: JobContext, result: Result): Promise<void> {
    try {
      await this.report(ctx.delivery, result);
    } catch (err) {
      this.log(`reporting job ${ctx.jobId} attempt ${ctx.attempt}: ${(err as Error).message}`);
    }
  }
}

/** The `traceparent` to send with an attempt's result: the delivery's, or one of the job's trace with a fresh span. */
export function traceHeader(d: Delivery): string | undefined {
  if (d.traceparent) return d.traceparent;
  if (/^[0-9a-f]{32}$/.test(d.traceId) && /[1-9a-f]/.test(d.traceId)) {
    const span = Array.from({ length: 16 }, () => "0123456789abcdef"[Math.floor(Math.random() * 16)]).join("");
    return `00-${d.traceId}-${span}-01`;
  }
  return undefined;
}
