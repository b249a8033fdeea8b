/**
 * The LangChain.js adapter (`npm install @langchain/core`): a capability as a
 * `DynamicStructuredTool`.
 *
 * ```ts
 * import { capabilityTool } from "agentreach/langchain";
 * const track = capabilityTool(client, "parcel.track", { name: "track_parcel", description: "Where a parcel is." });
 * await track.invoke({ input: "parcel 42" });
 * ```
 *
 * The tool's arguments are the job's payload; it answers the result as text
 * (a string as it is, anything else as JSON) and throws `CapabilityFailed`
 * when the job does not succeed.
 */

import { DynamicStructuredTool } from "@langchain/core/tools";
import type { Client } from "./client.js";
import { asText, callCapability, DEFAULT_TOOL_SCHEMA, type CapabilityToolOptions } from "./tool.js";

export { CapabilityFailed, type CapabilityToolOptions, type ObjectSchema } from "./tool.js";

/** Options of a LangChain capability tool. */
export interface LangChainToolOptions extends CapabilityToolOptions {
  /** The tool's name, for the model (default: the capability with every other character than [A-Za-z0-9_-] as _). */
  name?: string;
}

/** A LangChain tool that runs `capability` through Agent-Reach and answers its result as text. */
export function capabilityTool(client: Client, capability: string, opts: LangChainToolOptions): DynamicStructuredTool {
  // The JSON Schema overloads of the constructor are heavy generics; the tool's input is the payload, any JSON.
  const Tool = DynamicStructuredTool as unknown as new (fields: Record<string, unknown>) => DynamicStructuredTool;
  return new Tool({
    name: opts.name ?? capability.replace(/[^A-Za-z0-9_-]/g, "_"),
    description: opts.description,
    schema: opts.schema ?? DEFAULT_TOOL_SCHEMA,
    func: async (input: unknown) => asText(await callCapability(client, capability, input, opts)),
  });
}
