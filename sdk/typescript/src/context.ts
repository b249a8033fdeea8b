/** What a handler gets for one attempt: the delivery, and a signal that says it should stop. */

import type { Delivery } from "./types.js";

/** Why a job's context ended. */
export type CancelReason = "cancelled" | "deadline" | "shutdown" | "disconnected";

/** Reports progress on an attempt; see {@link JobContext.progress}. */
export type ProgressFn = (progress?: unknown, extendMs?: number) => Promise<number | undefined>;

/**
 * One attempt of a job as a handler sees it. `signal` aborts (with the
 * reason in `cancelReason`) when the job is cancelled, its deadline passes,
 * the agent shuts down, or Agent-Reach hung up on an inline answer; pass it
 * on to `fetch` and the like.
 */
export class JobContext {
  /** The delivery as it came (its deadline moves when the SDK extends it). */
  delivery: Delivery;
  /** Why the context ended, once it has. */
  cancelReason?: CancelReason;
  private readonly ac = new AbortController();
  private readonly progressFn?: ProgressFn;

  constructor(delivery: Delivery, progress?: ProgressFn) {
    this.delivery = delivery;
    this.progressFn = progress;
  }

  /** The job's id. */
  get jobId(): string {
    return this.delivery.jobId;
  }
  /** The attempt number (from 1). */
  get attempt(): number {
    return this.delivery.attempt;
  }
  /** The capability the job was submitted for (or resolved to). */
  get capability(): string {
    return this.delivery.capability;
  }
  /** The job's payload, as the caller sent it. */
  get payload(): unknown {
    return this.delivery.payload;
  }
  /** The job's trace id. */
  get traceId(): string {
    return this.delivery.traceId;
  }
  /** When the attempt times out (ms since the epoch). */
  get deadline(): number | undefined {
    return this.delivery.deadline;
  }
  /** Whether a caller called the agent itself (lookup mode, with a verified grant). */
  get direct(): boolean {
    return this.delivery.direct;
  }
  /** Aborts when the job's context ends. */
  get signal(): AbortSignal {
    return this.ac.signal;
  }
  /** Whether the job's context has ended. */
  get cancelled(): boolean {
    return this.ac.signal.aborted;
  }

  /** Milliseconds until the deadline (negative past it), or undefined without one. */
  timeLeftMs(): number | undefined {
    return this.delivery.deadline === undefined ? undefined : this.delivery.deadline - Date.now();
  }

  /**
   * Reports how far the work got (any JSON, read by the caller in the job's
   * events and `progress`), and with `extendMs` makes the deadline now +
   * extendMs when later. Answers the attempt's deadline. The SDK calls it by
   * itself for a handler that runs long. Not for a direct call.
   */
  async progress(progress?: unknown, extendMs = 0): Promise<number | undefined> {
    if (!this.progressFn || this.direct) throw new Error("progress is reported on brokered attempts only");
    return this.progressFn(progress, extendMs);
  }

  /** Ends the context; answers whether it was still running. @internal */
  cancel(reason: CancelReason): boolean {
    if (this.ac.signal.aborted) return false;
    this.cancelReason = reason;
    this.ac.abort(new Error(`the job's context ended: ${reason}`));
    return true;
  }
}

/** A handler: takes the job's context, answers a result made by `success()`/`failure()` or any JSON value (a SUCCESS with it). Throw `Refused` to decline an attempt unstarted; throw anything else to fail the attempt (it is retried). */
export type Handler = (job: JobContext) => unknown | Promise<unknown>;
