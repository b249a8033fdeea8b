/**
 * Lookup mode, the caller's side: the ranked candidates of a capability
 * (`POST /v1/lookup`, each with an invocation grant), cached briefly; a direct
 * call of the best one that fails over to the next; and the outcome reports
 * (`POST /v1/reports`) that fold direct calls into the agents' figures.
 * Mirrors the Go client (`sdk/client`) and the Python SDK (`direct.py`).
 */

import { randomBytes, randomUUID } from "node:crypto";
import { AgentReachError } from "./errors.js";

/** The states a cached candidate is never served in. */
export const NOT_SERVABLE: ReadonlySet<string> = new Set(["SUSPECT", "DOWN", "OFFLINE", "DRAINING", "PROBING"]);
/** How long before its earliest grant expires a cached answer stops being fresh (ms). */
export const GRANT_MARGIN_MS = 10_000;
/** How old a report may be (ms): a margin under the service's 10 minutes. */
export const REPORT_WINDOW_MS = (600 - 30) * 1000;
/** The service's bound on one `POST /v1/reports`. */
export const MAX_REPORTS_PER_BATCH = 1000;
/** The largest inline answer read from an agent. */
export const MAX_AGENT_ANSWER = 16 << 20;

/** An agent a lookup found, to call directly at `endpoint` with `grant`. */
export interface Candidate {
  agent_id: string;
  namespace: string;
  endpoint: string;
  protocol: string;
  protocol_version?: string;
  version?: string;
  score: number;
  state: string;
  ttl_ms: number;
  /** The invocation grant (`X-Reach-Grant`): a credential, for this agent and capability only. */
  grant: string;
  grant_expires_at: string;
}

/** A lookup's answer: the candidates, best first. */
export interface LookupResult {
  candidates: Candidate[];
  /** How long (ms) the answer may still be used as fresh. */
  ttlMs: number;
  /** When it was fetched from the registry (ms since the epoch). */
  fetchedAt: number;
  /** Served from memory without asking the registry. */
  cached: boolean;
  /** The registry could not be reached and this is the last list known. */
  stale: boolean;
  /** The log position to watch agent changes from. */
  watchFrom: number;
}

/** The outcome of one direct call, for the agent's health figures. */
export interface DirectReport {
  agent_id: string;
  capability: string;
  /** The agent took the call and answered a result (a connection error, a timeout or a 5xx is not reached). */
  reached: boolean;
  /** That result was a SUCCESS. */
  ok?: boolean;
  latency_ms?: number;
  biz_code?: string;
  /** When the call was made (RFC 3339; default now). */
  at?: string;
  /** The agent's namespace (a candidate's); empty is the key's. */
  namespace?: string;
}

/** One candidate's call by `invoke`. */
export interface Attempt {
  agentId: string;
  namespace: string;
  endpoint: string;
  /** The agent took the call and answered a result. */
  reached: boolean;
  /** Its HTTP status; 0 without an answer. */
  statusCode: number;
  latencyMs: number;
  /** Why it gave no result. */
  error?: string;
  /** The agent refused the grant (401 or 403): not reported. */
  grantRefused?: boolean;
}

/** What the agent that took a direct invocation answered. */
export interface InvokeResult {
  status: "SUCCESS" | "FAILED";
  result: unknown;
  biz_code?: string;
  agentId: string;
  namespace: string;
  /** The envelope's `job_id` (a UUID v7), the same for every candidate tried. */
  invocationId: string;
  traceId: string;
  latencyMs: number;
  stale: boolean;
  /** The candidates called, in order, the answering one last. */
  attempts: Attempt[];
}

/** `invoke` found no candidate that answered a result. */
export class NoCandidates extends AgentReachError {
  readonly attempts: Attempt[];
  constructor(message: string, attempts: Attempt[] = []) {
    super(message, { code: "no_candidates" });
    this.attempts = attempts;
  }
}

/** What makes two lookups the same: the body sent and its cache key. */
export interface Question {
  capability: string;
  key: string;
  body: Record<string, unknown>;
}

/** Options of a lookup. */
export interface LookupOptions {
  hint?: string;
  namespace?: string;
  constraints?: { version?: string; protocol?: string; protocol_versions?: string[] };
  limit?: number;
  /** Ask the registry even when a fresh answer is cached. */
  noCache?: boolean;
}

/** The lookup to ask, and its cache key. */
export function question(capability: string, o: LookupOptions): Question {
  const body: Record<string, unknown> = { capability };
  if (o.hint) body.hint = o.hint;
  if (o.namespace) body.namespace = o.namespace;
  const cons: Record<string, unknown> = {};
  for (const k of ["version", "protocol", "protocol_versions"] as const) {
    const v = o.constraints?.[k];
    if (v && (!Array.isArray(v) || v.length)) cons[k] = v;
  }
  if (Object.keys(cons).length) body.constraints = cons;
  if (o.limit) body.limit = o.limit;
  return { capability, key: JSON.stringify(body), body };
}

interface Entry {
  fetchedAt: number;
  freshUntil: number;
  ttlMs: number;
  watchFrom: number;
  candidates: Candidate[];
}

/** Lookup answers, least recently used out first: fresh for their TTL, then kept as the last known list for when the registry is unreachable. */
export class LookupCache {
  private readonly entries = new Map<string, Entry>();
  constructor(readonly size = 256) {}

  /** Key's answer if it is fresh at `now`. */
  fresh(key: string, now = Date.now()): LookupResult | undefined {
    const e = this.entries.get(key);
    if (!e || this.size <= 0 || now >= e.freshUntil || !e.candidates.length) return undefined;
    this.entries.delete(key);
    this.entries.set(key, e);
    return { candidates: [...e.candidates], ttlMs: e.freshUntil - now, fetchedAt: e.fetchedAt, cached: true, stale: false, watchFrom: e.watchFrom };
  }

  /** Key's last known list, fresh or not. */
  stale(key: string): LookupResult | undefined {
    const e = this.entries.get(key);
    if (!e || !e.candidates.length) return undefined;
    return { candidates: [...e.candidates], ttlMs: 0, fetchedAt: e.fetchedAt, cached: false, stale: true, watchFrom: e.watchFrom };
  }

  /** Keeps an answer, without the candidates that must not be served from the cache. */
  store(key: string, answer: { candidates?: Candidate[]; ttl_ms?: number; watch_from?: number }, fetchedAt: number): void {
    const candidates = (answer.candidates ?? []).filter((c) => !NOT_SERVABLE.has(c.state));
    if (!candidates.length) {
      this.entries.delete(key);
      return;
    }
    const ttlMs = answer.ttl_ms ?? 0;
    let until = fetchedAt + ttlMs;
    for (const c of candidates) {
      if (c.ttl_ms > 0) until = Math.min(until, fetchedAt + c.ttl_ms);
      const exp = Date.parse(c.grant_expires_at);
      if (!Number.isNaN(exp)) until = Math.min(until, exp - GRANT_MARGIN_MS);
    }
    this.entries.delete(key);
    this.entries.set(key, { fetchedAt, freshUntil: until, ttlMs, watchFrom: answer.watch_from ?? 0, candidates });
    while (this.entries.size > Math.max(1, this.size)) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  /** Forgets every answer. */
  clear(): void {
    this.entries.clear();
  }
}

/** 3 × the p99 of `samples` (ms), between 1 s and `ceiling`; `ceiling` until ten answered. */
export function callTimeout(samples: readonly number[], ceilingMs: number): number {
  if (samples.length < CallMemory.MIN_SAMPLES) return ceilingMs;
  const s = [...samples].sort((a, b) => a - b);
  const p99 = s[Math.min(s.length - 1, Math.floor((s.length * 99 + 99) / 100) - 1)];
  return Math.min(Math.max(3 * p99, CallMemory.MIN_TIMEOUT_MS), ceilingMs);
}

/**
 * What `invoke` remembers of earlier calls, so a hung or dead agent costs a
 * caller once: each capability's answered latencies (the last 64), and the
 * candidates quarantined (tried after every other one) after a connection
 * error or a timeout.
 */
export class CallMemory {
  static readonly SAMPLES = 64;
  static readonly MIN_SAMPLES = 10;
  static readonly MIN_TIMEOUT_MS = 1000;
  private readonly latencies = new Map<string, number[]>();
  private readonly until = new Map<string, number>();

  constructor(
    readonly quarantineMs = 30_000,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** How long (ms) a candidate of `capability` has to answer. */
  timeout(capability: string, ceilingMs: number): number {
    return callTimeout(this.latencies.get(capability) ?? [], ceilingMs);
  }

  /** Remembers an answered call's latency. */
  answered(capability: string, latencyMs: number): void {
    const l = this.latencies.get(capability) ?? [];
    l.push(latencyMs);
    if (l.length > CallMemory.SAMPLES) l.splice(0, l.length - CallMemory.SAMPLES);
    this.latencies.set(capability, l);
  }

  /** Quarantines a candidate that could not be reached or did not answer in time. */
  failed(c: { namespace: string; agent_id: string }): void {
    if (this.quarantineMs > 0) this.until.set(`${c.namespace}/${c.agent_id}`, this.clock() + this.quarantineMs);
  }

  /** Whether a candidate is quarantined now. */
  quarantined(c: { namespace: string; agent_id: string }): boolean {
    const until = this.until.get(`${c.namespace}/${c.agent_id}`);
    return until !== undefined && until > this.clock();
  }

  /** `cands` with the quarantined ones last, each group in its order. */
  order<C extends { namespace: string; agent_id: string }>(cands: readonly C[]): C[] {
    const now = this.clock();
    for (const [k, until] of this.until) if (until <= now) this.until.delete(k);
    const held = (c: C) => this.until.has(`${c.namespace}/${c.agent_id}`);
    return [...cands.filter((c) => !held(c)), ...cands.filter(held)];
  }
}

/** A UUID v7: 48 bits of unix milliseconds, then randomness (RFC 9562). */
export function uuid7(): string {
  const b = randomBytes(16);
  const ms = BigInt(Date.now());
  for (let i = 0; i < 6; i++) b[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The trace id and flags of a W3C `traceparent`, or a new trace's when it is not one. */
export function traceOf(traceparent?: string): [string, string] {
  const m = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-([0-9a-f]{2})$/.exec((traceparent ?? "").trim().toLowerCase());
  if (m && m[1] !== "0".repeat(32)) return [m[1], m[2]];
  return [randomBytes(16).toString("hex"), "01"];
}

/** A random idempotency key. */
export function newKey(): string {
  return randomUUID();
}

/** Reports waiting to be sent, in order. */
export class ReportQueue {
  private pending: DirectReport[] = [];
  constructor(
    readonly batch = 100,
    readonly maxPending = 10_000,
  ) {}

  get length(): number {
    return this.pending.length;
  }

  /** Queues reports; answers whether a batch is full. */
  add(reports: DirectReport[]): boolean {
    this.pending.push(...reports);
    const over = this.pending.length - this.maxPending;
    if (over > 0) this.pending.splice(0, over);
    return this.pending.length >= this.batch;
  }

  /** The next batch: reports of the first one's namespace, in order, without those too old to be taken. */
  take(): DirectReport[] {
    const oldest = Date.now() - REPORT_WINDOW_MS;
    this.pending = this.pending.filter((r) => !r.at || Date.parse(r.at) >= oldest);
    if (!this.pending.length) return [];
    const ns = this.pending[0].namespace ?? "";
    const batch: DirectReport[] = [];
    const rest: DirectReport[] = [];
    for (const r of this.pending) ((r.namespace ?? "") === ns && batch.length < MAX_REPORTS_PER_BATCH ? batch : rest).push(r);
    this.pending = rest;
    return batch;
  }

  /** Puts a batch that could not be sent back at the front. */
  requeue(batch: DirectReport[]): void {
    this.pending.unshift(...batch);
  }
}

/** The body of `POST /v1/reports` for one batch (all of one namespace). */
export function reportBody(batch: DirectReport[]): Record<string, unknown> {
  const reports = batch.map((r) => {
    const out: Record<string, unknown> = {
      agent_id: r.agent_id,
      capability: r.capability,
      reached: r.reached,
      ok: r.ok ?? false,
      latency_ms: Math.max(0, Math.round((r.latency_ms ?? 0) * 1000) / 1000),
      at: r.at ?? new Date().toISOString(),
    };
    if (r.biz_code) out.biz_code = r.biz_code;
    return out;
  });
  const body: Record<string, unknown> = { reports };
  if (batch[0]?.namespace) body.namespace = batch[0].namespace;
  return body;
}
