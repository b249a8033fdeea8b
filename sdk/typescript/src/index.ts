/**
 * Agent-Reach's TypeScript SDK.
 *
 * - {@link Client}: submit jobs by capability or intent, wait for them, cancel, replay, resolve intents;
 *   look a capability up and call its agents directly (lookup mode).
 * - {@link Agent}: a push agent serving deliveries over `node:http` (or any fetch-style server).
 * - {@link Worker}: a pull worker claiming its work.
 * - {@link verifyCallback} / {@link verifyDelivery}: Standard Webhooks signature checks.
 *
 * Sub-paths: `agentreach/ai` (Vercel AI SDK tool), `agentreach/langchain` (LangChain.js tool),
 * `agentreach/express`, `agentreach/hono`.
 */

export { Client, type ClientOptions, type SubmitOptions, type RunOptions, type WaitOptions, type InvokeOptions } from "./client.js";
export { Agent, type PushAgentOptions, type EndpointAnswer } from "./agent.js";
export { Worker, type WorkerOptions } from "./worker.js";
export { AgentBase, type AgentOptions } from "./agentbase.js";
export { JobContext, type Handler, type CancelReason } from "./context.js";
export {
  AgentReachError,
  APIError,
  TransportError,
  SignatureError,
  WaitTimeout,
  RegistrationError,
  Refused,
  errorFromResponse,
  type ErrorBody,
} from "./errors.js";
export {
  verifyCallback,
  verifyDelivery,
  verifyWebhook,
  sign,
  deliveryKey,
  secretKey,
  TIMESTAMP_TOLERANCE_S,
  type CallbackEvent,
  type HeaderSource,
  type VerifyOptions,
} from "./signing.js";
export { verifyGrant, InvalidGrant, GRANT_HEADER, type Grant } from "./grant.js";
export {
  CallMemory,
  LookupCache,
  NoCandidates,
  callTimeout,
  type Candidate,
  type LookupResult,
  type LookupOptions,
  type DirectReport,
  type Attempt,
  type InvokeResult,
} from "./direct.js";
export {
  success,
  failure,
  isTerminal,
  parseDelivery,
  TERMINAL_STATUSES,
  type Result,
  type Delivery,
  type Job,
  type JobEvent,
  type JobStatus,
  type Submitted,
  type SubmitRequest,
  type Resolution,
  type Registration,
  type CapabilityDoc,
  type AgentInfo,
  type DeliveryEnvelope,
  type HeldAttempt,
  type components,
  type paths,
} from "./types.js";
export { Transport, DEFAULT_URL, type FetchLike, type Call } from "./transport.js";
export { VERSION } from "./version.js";
