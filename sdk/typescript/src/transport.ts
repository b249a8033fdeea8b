/**
 * HTTP to Agent-Reach with the platform's `fetch`: one request shape and one
 * retry rule, as the Python and Go SDKs have it.
 *
 * A request that never left (connection refused) is tried again; a `429` or
 * `503` (the service wrote nothing) is tried again after its `Retry-After`; a
 * broken connection after sending, a `502` or a `504` only when the request
 * is idempotent. A `401` is never retried. No retry waits past `deadline`.
 * Credentials are never part of an error's text.
 */

import { AgentReachError, errorFromResponse, TransportError } from "./errors.js";
import { VERSION } from "./version.js";

/** The default base URL of the service. */
export const DEFAULT_URL = "http://127.0.0.1:8080";
/** The User-Agent the SDK sends. */
export const USER_AGENT = `agentreach-typescript/${VERSION}`;

/** The service's base URL: the one given, else `AGENTREACH_URL`, else http://127.0.0.1:8080. */
export function envUrl(url?: string): string {
  return (url || process.env.AGENTREACH_URL || DEFAULT_URL).replace(/\/+$/, "");
}

/** The API key: the one given, else `AGENTREACH_KEY`, else none. */
export function envKey(key?: string): string | undefined {
  return key !== undefined ? key || undefined : process.env.AGENTREACH_KEY || undefined;
}

/** A `fetch` function (the platform's by default; tests may wrap it). */
export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** One request to the service. */
export interface Call {
  method: string;
  /** A path under the base URL, or an absolute URL. */
  path: string;
  json?: unknown;
  query?: Record<string, string | number | undefined>;
  headers?: Record<string, string>;
  /** The credential: an API key or an agent token. */
  bearer?: string;
  /** Names the credential in a 401's message ("API key", "agent token"). */
  credential?: string;
  /** Whether the request may be repeated after a broken connection. */
  idempotent?: boolean;
  /** How many times to try again (default: the transport's). */
  retries?: number;
  /** Milliseconds one try may take. */
  timeoutMs?: number;
  /** No retry waits past this time (ms since the epoch). */
  deadline?: number;
  /** Ends the call (and its retries) when aborted. */
  signal?: AbortSignal;
  /** A 429 is thrown at once, not retried: the caller handles it (a refused wait falls back to polling). */
  passRateLimit?: boolean;
}

/** The answer to a call: its status and decoded body. */
export interface Answer<T = unknown> {
  status: number;
  body: T;
  headers: Headers;
}

/** Options of a {@link Transport}. */
export interface TransportOptions {
  timeoutMs?: number;
  maxRetries?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  fetch?: FetchLike;
}

const RETRY_STATUS = new Set([429, 503]);
const RETRY_STATUS_IDEMPOTENT = new Set([502, 504]);

/** Sleeps `ms`, or less when `signal` aborts (then it rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function hint(call: Call): string {
  const cred = call.credential ?? "API key";
  if (!call.bearer) {
    return cred === "API key" ? "Agent-Reach needs an API key: set AGENTREACH_KEY or pass apiKey" : `no ${cred} to send`;
  }
  return `the ${cred} was refused`;
}

/** Whether a fetch error happened before the request was sent (so repeating it is safe). */
function neverSent(err: unknown): boolean {
  const cause = (err as { cause?: { code?: string } } | undefined)?.cause;
  const code = cause?.code ?? "";
  return ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"].includes(code);
}

function describe(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause?.code || e?.cause?.message;
  return `${e?.name ?? "Error"}: ${e?.message ?? String(err)}${cause ? ` (${cause})` : ""}`;
}

/** Sends calls to one service, retrying as the module says. */
export class Transport {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  readonly fetch: FetchLike;

  constructor(baseUrl: string, opts: TransportOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.maxRetries = opts.maxRetries ?? 3;
    this.backoffMs = opts.backoffMs ?? 200;
    this.maxBackoffMs = opts.maxBackoffMs ?? 5_000;
    this.fetch = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** The absolute URL of a call. */
  url(call: Call): string {
    const base = /^https?:\/\//.test(call.path) ? call.path : this.baseUrl + call.path;
    const q = Object.entries(call.query ?? {}).filter(([, v]) => v !== undefined && v !== "");
    if (!q.length) return base;
    const params = new URLSearchParams(q.map(([k, v]) => [k, String(v)]));
    return base + (base.includes("?") ? "&" : "?") + params.toString();
  }

  private waitBefore(tries: number, retryAfter: number | undefined): number {
    if (retryAfter !== undefined) return Math.min(retryAfter * 1000, this.maxBackoffMs * 6);
    const base = Math.min(this.backoffMs * 2 ** tries, this.maxBackoffMs);
    return base * (0.5 + Math.random() / 2);
  }

  /** Sends `call` and answers the decoded body of a 2xx, or throws an {@link AgentReachError}. */
  async call<T = unknown>(call: Call): Promise<T> {
    return (await this.send<T>(call)).body;
  }

  /** Like {@link call}, with the status and headers of the answer. */
  async send<T = unknown>(call: Call): Promise<Answer<T>> {
    const url = this.url(call);
    const limit = call.retries ?? this.maxRetries;
    const headers: Record<string, string> = { "User-Agent": USER_AGENT, Accept: "application/json" };
    const body = call.json === undefined ? undefined : JSON.stringify(call.json);
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (call.bearer) headers.Authorization = "Bearer " + call.bearer;
    Object.assign(headers, call.headers ?? {});
    for (let tries = 0; ; tries++) {
      const timeout = AbortSignal.timeout(call.timeoutMs ?? this.timeoutMs);
      const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
      let resp: Response;
      let text: string;
      try {
        resp = await this.fetch(url, { method: call.method, headers, body, signal });
        text = await resp.text();
      } catch (err) {
        if (call.signal?.aborted) throw new TransportError(`${call.method} ${url}: aborted`, err);
        const wait = this.waitBefore(tries, undefined);
        if (tries < limit && (call.idempotent || neverSent(err)) && this.inTime(call, wait)) {
          await sleep(wait, call.signal);
          continue;
        }
        throw new TransportError(`${call.method} ${url}: ${describe(err)}`, err);
      }
      let decoded: unknown = undefined;
      if (text) {
        try {
          decoded = JSON.parse(text);
        } catch {
          decoded = text;
        }
      }
      if (resp.status >= 200 && resp.status < 300) {
        return { status: resp.status, body: decoded as T, headers: resp.headers };
      }
      const err = errorFromResponse(resp.status, decoded, resp.headers.get("Retry-After"), resp.status === 401 ? hint(call) : undefined);
      const retryable =
        resp.status !== 401 &&
        !(resp.status === 429 && call.passRateLimit) && (RETRY_STATUS.has(resp.status) || (call.idempotent === true && RETRY_STATUS_IDEMPOTENT.has(resp.status)));
      const wait = this.waitBefore(tries, err.retryAfter);
      if (tries < limit && retryable && this.inTime(call, wait)) {
        await sleep(wait, call.signal);
        continue;
      }
      throw err;
    }
  }

  private inTime(call: Call, waitMs: number): boolean {
    return call.deadline === undefined || Date.now() + waitMs < call.deadline;
  }
}

/** Whether `err` says the service could not be reached (no answer, 502, 503, 504). */
export function unreachable(err: unknown): boolean {
  return err instanceof TransportError || (err instanceof AgentReachError && [502, 503, 504].includes(err.status));
}

/** Waits for `p` at most `ms`; answers whether it settled in time. The timer never keeps the process alive and is cleared once `p` settles. */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((r) => {
    timer = setTimeout(() => r(false), Math.max(0, ms));
    timer.unref();
  });
  try {
    return await Promise.race([p.then(() => true as const, () => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
