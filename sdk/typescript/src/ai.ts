/**
 * The Vercel AI SDK adapter (`npm install ai`): a capability as a tool.
 *
 * ```ts
 * import { capabilityTool } from "agentreach/ai";
 * const tools = { track: capabilityTool(client, "parcel.track", { description: "Where a parcel is.", schema }) };
 * await generateText({ model, tools, prompt: "Where is parcel 42?" });
 * ```
 *
 * The tool's arguments are the job's payload; its output is the job's result.
 */

import { jsonSchema, tool } from "ai";
import type { Client } from "./client.js";
import { callCapability, DEFAULT_TOOL_SCHEMA, type CapabilityToolOptions } from "./tool.js";

export { CapabilityFailed, type CapabilityToolOptions, type ObjectSchema } from "./tool.js";

/** A tool of the AI SDK (`tool()` with a `jsonSchema()` input) that runs `capability` through Agent-Reach. */
export function capabilityTool(client: Client, capability: string, opts: CapabilityToolOptions) {
  return tool<Record<string, unknown>, unknown>({
    description: opts.description,
    inputSchema: jsonSchema<Record<string, unknown>>(opts.schema ?? DEFAULT_TOOL_SCHEMA),
    execute: async (input: Record<string, unknown>) => callCapability(client, capability, input, opts),
  });
}
