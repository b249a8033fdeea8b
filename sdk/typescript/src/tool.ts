/** What the framework tool adapters share: run a capability through Agent-Reach and answer its result. */

import type { Client, RunOptions } from "./client.js";
import { AgentReachError } from "./errors.js";
import type { Job } from "./types.js";

/** The job a tool submitted did not end in SUCCESS. */
export class CapabilityFailed extends AgentReachError {
  readonly job: Job;
  constructor(job: Job) {
    const detail = job.biz_code || job.error || "";
    super(`${job.capability} ended ${job.status}${detail ? `: ${detail}` : ""}`, { code: "capability_failed" });
    this.job = job;
  }
}

/** A JSON Schema of an object, as the tool adapters take it. */
export type ObjectSchema = {
  type: "object";
  properties?: Record<string, unknown>;
  required?: string[];
  additionalProperties?: boolean;
  [key: string]: unknown;
};

/** The default arguments of a tool: one text input. */
export const DEFAULT_TOOL_SCHEMA: ObjectSchema = {
  type: "object",
  properties: { input: { type: "string", description: "What to send to the capability." } },
  required: ["input"],
  additionalProperties: false,
};

/** Options of a capability tool. */
export interface CapabilityToolOptions {
  /** What the tool does, for the model. */
  description: string;
  /** The JSON Schema of the tool's arguments, which are the job's payload (default: one `input` string). */
  schema?: ObjectSchema;
  /** How long a call waits for the job (ms, default 120 s). */
  timeoutMs?: number;
  /** Submit options (priority, namespace, ...). */
  submit?: Omit<RunOptions, "timeoutMs">;
  /** Run by intent instead: the capability argument is ignored and the service resolves this intent. */
  intent?: string;
}

/** Runs `capability` with `payload` and answers the result; throws {@link CapabilityFailed} when the job does not succeed. */
export async function callCapability(client: Client, capability: string, payload: unknown, opts: CapabilityToolOptions): Promise<unknown> {
  const job = await client.run(opts.intent ? "" : capability, payload, {
    ...(opts.submit ?? {}),
    ...(opts.intent ? { intent: opts.intent } : {}),
    timeoutMs: opts.timeoutMs ?? 120_000,
  });
  if (job.status !== "SUCCESS") throw new CapabilityFailed(job);
  return job.result;
}

/** A result as an LLM reads it: a string as it is, anything else as JSON. */
export function asText(result: unknown): string {
  return typeof result === "string" ? result : JSON.stringify(result) ?? "null";
}
