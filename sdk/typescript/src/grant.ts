/**
 * Invocation grants: what a caller that looked an agent up shows it on a
 * direct call (`X-Reach-Grant`). A grant is `v1.<base64url JSON>.<sig>[.<sig>]`:
 * the JSON names the namespace, agent, capability, the caller's key id and an
 * expiry (unix seconds); each signature is an HMAC-SHA256 of `"v1.<base64url JSON>"`
 * keyed with the SHA-256 of an agent token, so the agent checks it with what it holds.
 */

import { createHmac, timingSafeEqual } from "node:crypto";
import { SignatureError } from "./errors.js";
import { deliveryKey } from "./signing.js";

/** The header a direct call carries its grant in. */
export const GRANT_HEADER = "X-Reach-Grant";

/** What a grant says. */
export interface Grant {
  namespace: string;
  agent: string;
  capability: string;
  keyId: string;
  issuedAt: number;
  expires: number;
}

/** A grant that is malformed, not signed for this agent, for another agent or capability, or expired. */
export class InvalidGrant extends SignatureError {}

function b64url(s: string): Buffer {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new InvalidGrant("invalid invocation grant: unreadable");
  return Buffer.from(s, "base64url");
}

/**
 * Checks a grant against the agent's token(s), its id and the capability
 * called (empty: any), at `now` (unix seconds). Answers what it says.
 */
export function verifyGrant(tokens: string | string[], grant: string, agentId: string, capability = "", now = Date.now() / 1000): Grant {
  const parts = grant.split(".");
  if (parts.length < 3 || parts[0] !== "v1") throw new InvalidGrant("invalid invocation grant: not a v1 grant");
  const signed = Buffer.from("v1." + parts[1], "utf8");
  const wants = (Array.isArray(tokens) ? tokens : [tokens]).filter(Boolean).map((t) => createHmac("sha256", deliveryKey(t)).update(signed).digest());
  let ok = false;
  for (const sig of parts.slice(2)) {
    let got: Buffer;
    try {
      got = b64url(sig);
    } catch {
      continue;
    }
    for (const want of wants) if (got.length === want.length && timingSafeEqual(got, want)) ok = true;
  }
  if (!ok) throw new InvalidGrant("invalid invocation grant: not signed for this agent");
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(b64url(parts[1]).toString("utf8")) as Record<string, unknown>;
    if (typeof doc !== "object" || doc === null) throw new Error("not an object");
  } catch {
    throw new InvalidGrant("invalid invocation grant: unreadable");
  }
  const str = (k: string) => (typeof doc[k] === "string" ? (doc[k] as string) : "");
  const num = (k: string) => (typeof doc[k] === "number" ? (doc[k] as number) : 0);
  const g: Grant = { namespace: str("ns"), agent: str("agent"), capability: str("cap"), keyId: str("key"), issuedAt: num("iat"), expires: num("exp") };
  if (g.agent !== agentId) throw new InvalidGrant(`invalid invocation grant: for agent ${g.agent}`);
  if (capability && g.capability !== capability) throw new InvalidGrant(`invalid invocation grant: for capability ${g.capability}`);
  if (Math.floor(now) >= g.expires) throw new InvalidGrant("invalid invocation grant: expired");
  return g;
}
