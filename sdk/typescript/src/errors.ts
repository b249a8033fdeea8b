/**
 * The SDK's errors. Every error answer of Agent-Reach becomes an
 * {@link AgentReachError} carrying the HTTP status and the stable `code` of
 * the service's body (`{"error": {"code", "message", "field"}}`), so callers
 * branch on `err.code` and never parse text.
 */

/** The shape of an error answer of Agent-Reach. */
export interface ErrorBody {
  error: {
    code: string;
    message: string;
    field?: string;
    suggestions?: { capability: string; score: number }[];
  };
}

/** The base of every error this package throws. */
export class AgentReachError extends Error {
  /** The HTTP status of the service's answer; 0 when there was none. */
  readonly status: number;
  /** The stable machine-readable code (`not_found`, `invalid_argument`, ...), or one of the SDK's own (`transport`, `signature`, ...). */
  readonly code: string;
  /** The request field at fault, for `invalid_argument`. */
  readonly field?: string;
  /** Seconds the service asked to wait (429, 503). */
  readonly retryAfter?: number;
  /** The decoded error body, when the service answered one. */
  readonly body?: unknown;

  constructor(
    message: string,
    opts: { status?: number; code?: string; field?: string; retryAfter?: number; body?: unknown; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = opts.status ?? 0;
    this.code = opts.code ?? "unknown";
    if (opts.field !== undefined) this.field = opts.field;
    if (opts.retryAfter !== undefined) this.retryAfter = opts.retryAfter;
    if (opts.body !== undefined) this.body = opts.body;
  }
}

/** An error answer of the service (any status but 2xx), with its code. */
export class APIError extends AgentReachError {
  /** The service's message for people. */
  readonly serviceMessage: string;
  /** `ambiguous_intent` only: the best candidates, for the caller to choose from. */
  readonly suggestions?: { capability: string; score: number }[];

  constructor(
    status: number,
    code: string,
    message: string,
    opts: { field?: string; retryAfter?: number; body?: unknown; hint?: string } = {},
  ) {
    let line = `${code} (${status}): ${message}`;
    if (opts.field) line += ` [field ${opts.field}]`;
    if (opts.hint) line = `${opts.hint} (${line})`;
    super(line.replace(/\n/g, " "), { status, code, field: opts.field, retryAfter: opts.retryAfter, body: opts.body });
    this.serviceMessage = message;
    const err = (opts.body as ErrorBody | undefined)?.error;
    if (err && Array.isArray(err.suggestions)) this.suggestions = err.suggestions;
  }
}

/** Agent-Reach (or an agent) could not be reached, the connection broke, or the request timed out. */
export class TransportError extends AgentReachError {
  constructor(message: string, cause?: unknown) {
    super(message, { code: "transport", cause });
  }
}

/** A delivery, a callback or a direct call whose signature or grant does not verify. */
export class SignatureError extends AgentReachError {
  constructor(message: string) {
    super(message, { code: "signature" });
  }
}

/** `wait()` or `run()` gave up before the job ended; `job` is the job as last seen. */
export class WaitTimeout extends AgentReachError {
  readonly job: unknown;
  constructor(message: string, job: unknown) {
    super(message, { code: "wait_timeout" });
    this.job = job;
  }
}

/** The registry refused an agent for good (a bad key, a missing scope, a bad field). */
export class RegistrationError extends AgentReachError {
  constructor(message: string, cause?: unknown) {
    super(message, { code: "registration", cause, status: cause instanceof AgentReachError ? cause.status : 0 });
  }
}

/**
 * Thrown by a handler to decline an attempt it has not started: a push agent
 * answers `503`, a pull worker gives the attempt back unstarted, and
 * Agent-Reach routes it again.
 */
export class Refused extends AgentReachError {
  constructor(message = "refused") {
    super(message, { code: "refused" });
  }
}

/** Builds the error of a non-2xx answer from its status, decoded body and `Retry-After`. */
export function errorFromResponse(status: number, body: unknown, retryAfter: string | null, hint?: string): APIError {
  let code = "";
  let message = "";
  let field: string | undefined;
  const err = typeof body === "object" && body !== null ? (body as Partial<ErrorBody>).error : undefined;
  if (err && typeof err === "object") {
    code = typeof err.code === "string" ? err.code : "";
    message = typeof err.message === "string" ? err.message : "";
    field = typeof err.field === "string" && err.field ? err.field : undefined;
  }
  if (!code) code = CODE_BY_STATUS[status] ?? "unknown";
  if (!message) message = typeof body === "string" && body.trim() ? body.trim().slice(0, 200) : `HTTP ${status}`;
  return new APIError(status, code, message, { field, retryAfter: parseRetryAfter(retryAfter), body, hint });
}

const CODE_BY_STATUS: Record<number, string> = {
  400: "invalid_argument",
  401: "unauthenticated",
  403: "permission_denied",
  404: "not_found",
  409: "conflict",
  410: "history_dropped",
  413: "payload_too_large",
  422: "fanout_exceeded",
  429: "rate_limited",
  431: "headers_too_large",
  500: "internal",
  503: "unavailable",
};

/** `Retry-After` in seconds: a number of seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const n = Number(value.trim());
  if (Number.isFinite(n)) return Math.max(0, n);
  const t = Date.parse(value);
  return Number.isNaN(t) ? undefined : Math.max(0, (t - Date.now()) / 1000);
}
