/**
 * A pull worker: an agent without an endpoint that claims its work.
 *
 * ```ts
 * const worker = new Worker({ agentId: "laptop-1", concurrency: 2 });
 * worker.handle("notes.summarize", async (job) => ({ summary: "..." }));
 * await worker.start();
 * ```
 *
 * It registers with `mode: "pull"`, long-polls `claim` (`wait_ms`) for at
 * most as many attempts as it has free slots, runs each (extending the
 * deadline of a long one with progress reports), and posts the result. A
 * handler that throws gives its attempt back failed (retried after backoff);
 * one that throws `Refused` gives it back unstarted. Jobs cancelled meanwhile
 * come in the heartbeat's answer and end their handlers' contexts. On
 * shutdown it stops claiming, gives back what it claimed but has not started,
 * waits for the rest, and goes offline.
 */

import { AgentBase, type AgentOptions } from "./agentbase.js";
import { APIError, AgentReachError, RegistrationError } from "./errors.js";
import { sleep, within } from "./transport.js";
import { parseDelivery, type Delivery } from "./types.js";
import type { JobContext } from "./context.js";

/** Options of a {@link Worker}. */
export interface WorkerOptions extends AgentOptions {
  /** How many attempts run at once (default 1). */
  concurrency?: number;
  /** How many more it claims ahead, to start as soon as a slot frees (default 0). */
  prefetch?: number;
  /** How long one claim long-polls (ms, at most 60 000; default 20 000). */
  claimWaitMs?: number;
}

/** A pull-mode agent with a concurrency limit. */
export class Worker extends AgentBase {
  protected readonly mode = "pull" as const;
  readonly concurrency: number;
  readonly prefetch: number;
  readonly claimWaitMs: number;
  /** How many claims the registry answered. */
  claims = 0;
  private readonly running = new Set<Promise<void>>();
  private readonly unstarted: Delivery[] = [];
  private claimLoop?: Promise<void>;
  private readonly claimStop = new AbortController();
  private slotFree?: () => void;

  constructor(opts: WorkerOptions) {
    const concurrency = opts.concurrency ?? 1;
    const prefetch = opts.prefetch ?? 0;
    if (concurrency < 1 || prefetch < 0) throw new RangeError("concurrency must be at least 1 and prefetch at least 0");
    super({ ...opts, maxConcurrent: opts.maxConcurrent ?? concurrency + prefetch });
    this.concurrency = concurrency;
    this.prefetch = prefetch;
    this.claimWaitMs = Math.min(Math.max(opts.claimWaitMs ?? 20_000, 0), 60_000);
  }

  protected override queueLength(): number {
    return this.unstarted.length;
  }

  /** Starts registering, heartbeating and claiming; answers at once (see {@link waitRegistered}). */
  start(): void {
    this.open();
    this.claimLoop = this.claimForever();
  }

  protected override onFatal(): void {
    this.claimStop.abort();
  }

  /**
   * Stops claiming and gives back unstarted work, tells the registry it takes
   * no more, waits for the rest up to `shutdownGraceMs` (then cancels it and
   * gives it back failed), and goes offline.
   */
  async stop(): Promise<void> {
    if (!this.started || this.stopping) return;
    this.stopping = true;
    this.claimStop.abort();
    this.slotFree?.();
    await this.claimLoop;
    if (this.token) await this.heartbeat({ context: { ...(this.opts.context ?? {}), accepting: false } });
    if (this.unstarted.length) await this.release(this.unstarted.splice(0), undefined);
    await this.drain(this.opts.shutdownGraceMs ?? 30_000);
    await within(Promise.allSettled([...this.running]), 10_000);
    await this.offline();
    await this.closeLife();
  }

  private async claimForever(): Promise<void> {
    const stop = this.claimStop.signal;
    let backoff = 200;
    try {
      while (!this.stopping) {
        if (!this.token) {
          if (this.fatal) return;
          await sleep(20, stop);
          continue;
        }
        const room = this.concurrency + this.prefetch - this.running.size - this.unstarted.length;
        if (room <= 0) {
          await new Promise<void>((r) => (this.slotFree = r));
          continue;
        }
        let got: Delivery[];
        try {
          got = await this.claim(room, stop);
          backoff = 200;
        } catch (err) {
          if (stop.aborted) return;
          if (err instanceof APIError && (err.status === 404 || err.status === 401)) {
            this.forget(); // the registry lost us (or replaced our token): register again
            continue;
          }
          if (err instanceof APIError && err.code === "not_pull") {
            this.fatal = new RegistrationError(`agent ${this.agentId} is registered in push mode: ${err.message}`, err);
            this.log(this.fatal.message);
            return;
          }
          if (!(err instanceof AgentReachError)) throw err;
          const wait = err.retryAfter !== undefined ? err.retryAfter * 1000 : backoff * (0.5 + Math.random());
          this.log(`claim of ${this.agentId}: ${err.message} (again in ${Math.round(wait)} ms)`);
          await sleep(wait, stop);
          backoff = Math.min(backoff * 2, 10_000);
          continue;
        }
        this.unstarted.push(...got);
        this.pump();
      }
    } catch {
      /* stopped */
    }
  }

  private async claim(n: number, stop: AbortSignal): Promise<Delivery[]> {
    const resp = await this.t.call<{ deliveries?: unknown[] }>({
      method: "POST",
      path: this.path("/claim"),
      query: this.query,
      json: { max: Math.min(n, 100), wait_ms: this.claimWaitMs },
      bearer: this.token,
      credential: "agent token",
      retries: 0,
      timeoutMs: this.claimWaitMs + 10_000,
      signal: stop,
    });
    this.claims++;
    const out: Delivery[] = [];
    for (const row of resp?.deliveries ?? []) {
      try {
        out.push(parseDelivery(row));
      } catch (err) {
        this.log(`skipped a claimed delivery: ${(err as Error).message}`);
      }
    }
    return out;
  }

  /** Starts claimed attempts while slots are free; drops one whose deadline passed unstarted. */
  private pump(): void {
    while (this.unstarted.length && this.running.size < this.concurrency && !this.stopping) {
      const d = this.unstarted.shift() as Delivery;
      if (d.deadline !== undefined && d.deadline <= Date.now()) {
        this.log(`job ${d.jobId} attempt ${d.attempt} waited past its deadline unstarted`);
        continue;
      }
      const ctx = this.newContext(d);
      this.hold(ctx);
      const p: Promise<void> = this.work(ctx).finally(() => {
        this.running.delete(p);
        this.releaseHold(ctx);
        this.pump();
        const f = this.slotFree;
        this.slotFree = undefined;
        f?.();
      });
      this.running.add(p);
    }
  }

  private async work(ctx: JobContext): Promise<void> {
    const route = this.route(ctx.capability);
    if (!route) {
      await this.release([ctx.delivery], `this worker serves no ${JSON.stringify(ctx.capability)}`);
      return;
    }
    const outcome = await this.runHandler(route, ctx, true);
    if (outcome.kind === "result" && outcome.result) await this.reportQuietly(ctx, outcome.result);
    else if (outcome.kind === "refused") await this.release([ctx.delivery], undefined);
    else if (outcome.kind === "error") {
      const e = outcome.error as Error | undefined;
      await this.release([ctx.delivery], `handler failed: ${e?.name ?? "Error"}: ${e?.message ?? String(outcome.error)}`);
    } else if (outcome.kind === "ended" && ctx.cancelReason === "shutdown") {
      await this.release([ctx.delivery], "the worker shut down before the job finished");
    }
  }

  /** Gives attempts back: unstarted (no `error`: routed again at once) or failed. */
  private async release(ds: Delivery[], error: string | undefined): Promise<void> {
    if (!ds.length) return;
    const body: Record<string, unknown> = { jobs: ds.map((d) => ({ job_id: d.jobId, attempt: d.attempt })) };
    if (error) body.error = error.slice(0, 4096);
    try {
      await this.t.call({
        method: "POST",
        path: this.path("/release"),
        query: this.query,
        json: body,
        bearer: this.token,
        credential: "agent token",
        idempotent: true,
        retries: 2,
      });
    } catch (err) {
      this.log(`giving back ${ds.length} attempt(s): ${(err as Error).message}`);
    }
  }
}
