/**
 * The values the API speaks. The request and response shapes come from the
 * OpenAPI document the service serves (generated into `openapi.ts` by
 * `npm run gen:types`, checked for drift by `npm run check:types`).
 */

import type { components, paths } from "./openapi.js";

export type { components, paths };

type Schemas = components["schemas"];

/**
 * A registration body (`POST /v1/agents`): the schema's object, without
 * the branches of its `anyOf` (which only say which fields are required).
 */
export type Registration = Exclude<Schemas["Registration"], Record<string, never>>;
/** What a capability does, for the catalogue that intent resolution reads. */
export type CapabilityDoc = Schemas["CapabilityDoc"];
/** An agent as the registry shows it. */
export type AgentInfo = Schemas["Agent"];
/** A submit body (`POST /v1/jobs`): `capability` or `intent`, and `payload`. */
export type SubmitRequest = Exclude<Schemas["Submit"], Record<string, never>>;
/** The answer to a submit or a replay. */
export type Submitted = Schemas["Submitted"];
/** A job as `GET /v1/jobs/{job_id}` shows it. */
export type Job = Schemas["Job"];
/** One event of a job's audit trail. */
export type JobEvent = Schemas["Event"];
/** How an intent resolved to a capability, with every resolver's step. */
export type Resolution = Schemas["Resolution"];
/** One attempt of a job, as pushed to an agent or claimed by a pull agent. */
export type DeliveryEnvelope = Schemas["Delivery"];
/** A job id and attempt number. */
export type HeldAttempt = Schemas["HeldAttempt"];
/** A job's status. */
export type JobStatus = Job["status"];

/** The statuses a job never leaves. */
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(["SUCCESS", "FAILED", "DEAD_LETTER", "CANCELLED", "REJECTED"]);

/** Whether a job is in a state it never leaves. */
export function isTerminal(job: { status: string }): boolean {
  return TERMINAL_STATUSES.has(job.status);
}

/** The outcome of an attempt: SUCCESS with a result, or FAILED (a business failure) with a biz_code. */
export interface Result {
  status: "SUCCESS" | "FAILED";
  result?: unknown;
  biz_code?: string;
}

const RESULT = Symbol.for("agentreach.result");

/** A SUCCESS with `result`. */
export function success(result?: unknown): Result {
  return mark({ status: "SUCCESS", ...(result === undefined ? {} : { result }) });
}

/** A FAILED with its business code and an optional detail: the work ran and could not be done (not retried unless the job asks). */
export function failure(bizCode: string, detail?: unknown): Result {
  return mark({ status: "FAILED", biz_code: bizCode, ...(detail === undefined ? {} : { result: detail }) });
}

function mark(r: Result): Result {
  Object.defineProperty(r, RESULT, { value: true, enumerable: false });
  return r;
}

/** A handler's return value as a result: one made by {@link success} or {@link failure} as it is, anything else a SUCCESS with it. */
export function asResult(value: unknown): Result {
  if (typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[RESULT] === true) return value as Result;
  return success(value);
}

/** One attempt of a job as an agent gets it. */
export interface Delivery {
  jobId: string;
  attempt: number;
  traceId: string;
  capability: string;
  payload: unknown;
  /** When the attempt times out (ms since the epoch), or undefined without one. */
  deadline?: number;
  /** Where to post the outcome (empty on a direct call). */
  resultUrl: string;
  /** The W3C trace context the delivery came with (push). */
  traceparent?: string;
  /** A direct call by a caller that looked the agent up (lookup mode), answered inline. */
  direct: boolean;
  /** The envelope as it came. */
  raw: Record<string, unknown>;
}

/** Reads an envelope; throws when it lacks a job id or an attempt. */
export function parseDelivery(doc: unknown, traceparent?: string, direct = false): Delivery {
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new Error("a delivery is a JSON object");
  const m = doc as Record<string, unknown>;
  const jobId = typeof m.job_id === "string" ? m.job_id : "";
  const attempt = typeof m.attempt === "number" ? m.attempt : 0;
  if (!jobId || attempt < 1) throw new Error("a delivery needs job_id and attempt");
  const deadline = typeof m.deadline === "string" ? Date.parse(m.deadline) : NaN;
  return {
    jobId,
    attempt,
    traceId: typeof m.trace_id === "string" ? m.trace_id : "",
    capability: typeof m.capability === "string" ? m.capability : "",
    payload: m.payload,
    deadline: Number.isNaN(deadline) ? undefined : deadline,
    resultUrl: typeof m.result_url === "string" ? m.result_url : "",
    traceparent: traceparent || undefined,
    direct,
    raw: m,
  };
}
