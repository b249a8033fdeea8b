/**
 * Signature checks of what Agent-Reach sends: deliveries to agents and
 * callbacks to callers. Both are Standard Webhooks: `webhook-id`,
 * `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256 of
 * "id.timestamp.body">`, within five minutes of now. A delivery is keyed
 * with the SHA-256 of the agent's token; a callback with the namespace's
 * `whsec_...` secret (`GET /v1/callbacks/secret`). During a rotation a
 * message carries two signatures, and either verifies.
 */

import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { SignatureError } from "./errors.js";

/** How far a message's timestamp may be from now, in seconds. */
export const TIMESTAMP_TOLERANCE_S = 5 * 60;

/** Headers as `fetch`, Node's `http` or a plain object has them. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

/** The value of header `name` (case-insensitive), or "" when it is absent. */
export function header(headers: HeaderSource, name: string): string {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? "";
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (k.toLowerCase() === want && v !== undefined) return Array.isArray(v) ? v.join(", ") : v;
  }
  return "";
}

/** The key deliveries to the agent holding `token` are signed with: the SHA-256 of the token. */
export function deliveryKey(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** The key of a `whsec_<base64>` secret (the base64 after the prefix, decoded). */
export function secretKey(secret: string): Buffer {
  const raw = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  const key = Buffer.from(raw, "base64");
  if (!key.length) throw new SignatureError("signature does not verify: the secret is empty or not base64");
  return key;
}

function toBuffer(body: string | Uint8Array): Buffer {
  return typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** The `v1,<base64>` signature of a message, as Agent-Reach writes it (for tests and for senders). */
export function sign(key: Uint8Array, id: string, timestamp: number | string, body: string | Uint8Array): string {
  const mac = createHmac("sha256", key);
  mac.update(`${id}.${timestamp}.`, "utf8");
  mac.update(toBuffer(body));
  return "v1," + mac.digest("base64");
}

/** Options of a verification. */
export interface VerifyOptions {
  /** Now, in seconds since the epoch (default: the clock's). */
  now?: number;
  /** Tolerance of the timestamp, in seconds (default five minutes). */
  toleranceS?: number;
}

/**
 * Verifies a Standard Webhooks message against one of `keys`; throws a
 * {@link SignatureError} when a header is missing, the timestamp is more
 * than the tolerance away from now, or no signature matches any key.
 * Comparisons are constant-time.
 */
export function verifyWebhook(keys: Uint8Array[], body: string | Uint8Array, headers: HeaderSource, opts: VerifyOptions = {}): void {
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  if (!id || !ts || !sigs) throw new SignatureError("signature does not verify: missing webhook-id, webhook-timestamp or webhook-signature");
  if (!/^\d+$/.test(ts)) throw new SignatureError("signature does not verify: bad webhook-timestamp");
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  const tolerance = opts.toleranceS ?? TIMESTAMP_TOLERANCE_S;
  const at = Number(ts);
  if (at < now - tolerance) throw new SignatureError("signature does not verify: the message timestamp is too old");
  if (at > now + tolerance) throw new SignatureError("signature does not verify: the message timestamp is too new");
  if (!keys.length) throw new SignatureError("signature does not verify: no key to verify with");
  const given: Buffer[] = [];
  for (const part of sigs.split(" ")) {
    const [version, value] = part.split(",", 2);
    if (version === "v1" && value) given.push(Buffer.from(value, "base64"));
  }
  let ok = false;
  for (const key of keys) {
    const want = Buffer.from(sign(key, id, ts, body).slice(3), "base64");
    for (const got of given) {
      // Not short-circuited, so the time taken says nothing of which matched.
      if (got.length === want.length && timingSafeEqual(got, want)) ok = true;
    }
  }
  if (!ok) throw new SignatureError("signature does not verify: no matching signature found");
}

/**
 * Checks that a delivery (or a cancel notice) was signed for the agent holding
 * `token` (or one of several: the current and the previous token).
 */
export function verifyDelivery(token: string | string[], body: string | Uint8Array, headers: HeaderSource, opts?: VerifyOptions): void {
  const tokens = (Array.isArray(token) ? token : [token]).filter(Boolean);
  if (!tokens.length) throw new SignatureError("signature does not verify: the agent is not registered yet");
  verifyWebhook(tokens.map(deliveryKey), body, headers, opts);
}

/** A verified callback: a job reached a terminal state. */
export interface CallbackEvent {
  job_id: string;
  status: string;
  result?: unknown;
  biz_code?: string;
  error?: string;
  attempts?: number;
  agent_id?: string;
  finished_at?: string;
  trace_id?: string;
  /** The `webhook-id` header: the same on every redelivery of this callback (deduplicate on it). */
  webhook_id: string;
  [field: string]: unknown;
}

/**
 * Verifies a callback with the namespace's `whsec_...` secret (or several,
 * around a rotation) and answers what it says; throws a {@link SignatureError}
 * when no secret verifies it or the body is not a JSON object.
 */
export function verifyCallback(secret: string | string[], body: string | Uint8Array, headers: HeaderSource, opts?: VerifyOptions): CallbackEvent {
  const secrets = Array.isArray(secret) ? secret : [secret];
  if (!secrets.length || secrets.some((s) => !s)) throw new SignatureError("signature does not verify: no callback secret given");
  verifyWebhook(secrets.map(secretKey), body, headers, opts);
  let doc: unknown;
  try {
    doc = JSON.parse(typeof body === "string" ? body : toBuffer(body).toString("utf8"));
  } catch {
    throw new SignatureError("the callback body is not JSON");
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new SignatureError("the callback body is not a JSON object");
  return { ...(doc as Record<string, unknown>), webhook_id: header(headers, "webhook-id") } as CallbackEvent;
}
