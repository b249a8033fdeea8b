/** Unit checks that need no service: Standard Webhooks signatures, grants, the failover memory, errors. */

import assert from "node:assert/strict";
import { createHash, createHmac } from "node:crypto";
import { describe, test } from "node:test";
import {
  CallMemory,
  InvalidGrant,
  SignatureError,
  callTimeout,
  errorFromResponse,
  failure,
  secretKey,
  success,
  verifyCallback,
  verifyDelivery,
  verifyGrant,
} from "../src/index.js";
import { asResult } from "../src/types.js";
import { parseRetryAfter } from "../src/errors.js";

/** A Standard Webhooks signature computed here, independently of the SDK's `sign`. */
function stdSign(key: Buffer, id: string, ts: number, body: string): string {
  return "v1," + createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64");
}

describe("signatures", () => {
  const now = Math.floor(Date.now() / 1000);
  const secret = "whsec_" + Buffer.from("0123456789abcdef0123456789abcdef").toString("base64");
  const body = JSON.stringify({ job_id: "j1", status: "SUCCESS", result: { ok: 1 } });
  const headers = (sig: string, ts = now) => ({ "webhook-id": "msg_1", "webhook-timestamp": String(ts), "webhook-signature": sig });

  test("a callback signed with the namespace secret verifies, with either secret of a rotation", () => {
    const good = stdSign(secretKey(secret), "msg_1", now, body);
    const ev = verifyCallback(secret, body, headers(good), { now });
    assert.deepEqual([ev.job_id, ev.status, ev.webhook_id, ev.result], ["j1", "SUCCESS", "msg_1", { ok: 1 }]);
    const other = "whsec_" + Buffer.alloc(32, 9).toString("base64");
    // Two signatures during a rotation: either secret verifies.
    const both = `${stdSign(secretKey(other), "msg_1", now, body)} ${good}`;
    verifyCallback([other], body, headers(both), { now });
    verifyCallback([secret], body, new Headers(headers(both)), { now });
  });

  test("a wrong secret, a changed body or id, a missing header, or a timestamp off by over five minutes is refused", () => {
    const good = stdSign(secretKey(secret), "msg_1", now, body);
    assert.throws(() => verifyCallback("whsec_" + Buffer.alloc(32, 1).toString("base64"), body, headers(good), { now }), SignatureError);
    assert.throws(() => verifyCallback(secret, body.replace("SUCCESS", "FAILED"), headers(good), { now }), SignatureError);
    assert.throws(() => verifyCallback(secret, body, { ...headers(good), "webhook-id": "msg_2" }, { now }), SignatureError);
    assert.throws(() => verifyCallback(secret, body, { "webhook-id": "msg_1", "webhook-signature": good }, { now }), /missing/);
    assert.throws(() => verifyCallback(secret, body, headers("v1,AAAA"), { now }), /no matching signature/);
    const old = now - 301;
    assert.throws(() => verifyCallback(secret, body, headers(stdSign(secretKey(secret), "msg_1", old, body), old), { now }), /too old/);
    const ahead = now + 301;
    assert.throws(() => verifyCallback(secret, body, headers(stdSign(secretKey(secret), "msg_1", ahead, body), ahead), { now }), /too new/);
    const near = now - 299;
    verifyCallback(secret, body, headers(stdSign(secretKey(secret), "msg_1", near, body), near), { now });
  });

  test("a delivery is keyed with the SHA-256 of the agent's token (either of two tokens)", () => {
    const token = "art_current";
    const key = createHash("sha256").update(token).digest();
    const sig = stdSign(key, "msg_1", now, body);
    verifyDelivery(token, Buffer.from(body), headers(sig), { now });
    verifyDelivery(["art_new", token], body, headers(sig), { now });
    assert.throws(() => verifyDelivery("art_other", body, headers(sig), { now }), SignatureError);
    assert.throws(() => verifyDelivery([], body, headers(sig)), /not registered/);
  });
});

describe("grants", () => {
  const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64url");
  function grant(tokens: string[], doc: Record<string, unknown>): string {
    const signed = "v1." + b64(JSON.stringify(doc));
    const sigs = tokens.map((t) => b64(createHmac("sha256", createHash("sha256").update(t).digest()).update(signed).digest()));
    return [signed, ...sigs].join(".");
  }
  const now = Math.floor(Date.now() / 1000);
  const doc = { ns: "default", agent: "a1", cap: "c", key: "k", iat: now, exp: now + 300 };

  test("a grant signed for the agent verifies; one for another agent, capability or token, or expired, does not", () => {
    const g = verifyGrant(["art_a"], grant(["art_x", "art_a"], doc), "a1", "c");
    assert.deepEqual([g.agent, g.capability, g.namespace, g.keyId], ["a1", "c", "default", "k"]);
    assert.throws(() => verifyGrant("art_b", grant(["art_a"], doc), "a1", "c"), /not signed for this agent/);
    assert.throws(() => verifyGrant("art_a", grant(["art_a"], { ...doc, agent: "a2" }), "a1", "c"), /for agent a2/);
    assert.throws(() => verifyGrant("art_a", grant(["art_a"], doc), "a1", "other"), /for capability c/);
    assert.throws(() => verifyGrant("art_a", grant(["art_a"], { ...doc, exp: now - 1 }), "a1", "c"), /expired/);
    assert.throws(() => verifyGrant("art_a", "v2.e30.AAAA", "a1"), InvalidGrant);
  });
});

describe("failover memory", () => {
  test("the per-call timeout is 3 × p99 once ten calls answered, between 1 s and the ceiling", () => {
    assert.equal(callTimeout([5, 5, 5], 30_000), 30_000);
    assert.equal(callTimeout(Array(10).fill(5), 30_000), 1000);
    assert.equal(callTimeout([...Array(9).fill(100), 2000], 30_000), 6000);
    assert.equal(callTimeout([...Array(99).fill(400), 2000], 30_000), 1200);
    assert.equal(callTimeout(Array(20).fill(20_000), 30_000), 30_000);
  });

  test("a failed candidate is tried last for the quarantine, then in its place again", () => {
    let now = 0;
    const m = new CallMemory(30_000, () => now);
    const cands = ["a", "b", "c"].map((id) => ({ namespace: "n", agent_id: id }));
    m.failed(cands[0]);
    assert.deepEqual(m.order(cands).map((c) => c.agent_id), ["b", "c", "a"]);
    now = 29_999;
    assert.ok(m.quarantined(cands[0]));
    now = 30_000;
    assert.deepEqual(m.order(cands).map((c) => c.agent_id), ["a", "b", "c"]);
  });
});

describe("errors and results", () => {
  test("an error body becomes an APIError with status, code, message and field", () => {
    const e = errorFromResponse(400, { error: { code: "invalid_argument", message: "bad", field: "timeout_ms" } }, null);
    assert.deepEqual([e.status, e.code, e.serviceMessage, e.field], [400, "invalid_argument", "bad", "timeout_ms"]);
    const proxy = errorFromResponse(502, "<html>bad gateway</html>", "2");
    assert.deepEqual([proxy.status, proxy.code, proxy.retryAfter], [502, "unknown", 2]);
    assert.equal(errorFromResponse(429, {}, null).code, "rate_limited");
    assert.equal(parseRetryAfter("x"), undefined);
    assert.ok((parseRetryAfter(new Date(Date.now() + 5000).toUTCString()) ?? 0) > 3);
  });

  test("a handler's value is a SUCCESS unless made by failure()", () => {
    assert.deepEqual(asResult({ status: "FAILED" }), { status: "SUCCESS", result: { status: "FAILED" } });
    assert.deepEqual(asResult(failure("nope", 1)), { status: "FAILED", biz_code: "nope", result: 1 });
    assert.deepEqual(asResult(success()), { status: "SUCCESS" });
  });
});

describe("package", () => {
  test("the core imports nothing but Node's built-ins; the adapters only their optional peers", async () => {
    const { readFileSync } = await import("node:fs");
    const { join, dirname } = await import("node:path");
    const { SDK_DIR } = await import("./harness.js");
    const bare = (file: string, seen = new Set<string>()): Set<string> => {
      const out = new Set<string>();
      if (seen.has(file)) return out;
      seen.add(file);
      const src = readFileSync(file, "utf8");
      for (const m of src.matchAll(/^(?:import|export)\s[^;]*?from\s+"([^"]+)"|^import\s+"([^"]+)"/gm)) {
        const spec = m[1] ?? m[2];
        if (spec.startsWith(".")) for (const x of bare(join(dirname(file), spec), seen)) out.add(x);
        else out.add(spec);
      }
      return out;
    };
    const dist = join(SDK_DIR, "dist");
    const core = bare(join(dist, "index.js"));
    assert.ok(core.has("node:crypto") && core.has("node:http"), [...core].join(" "));
    assert.deepEqual([...core].filter((s) => !s.startsWith("node:")), []);
    assert.deepEqual([...bare(join(dist, "ai.js"))].filter((s) => !s.startsWith("node:")), ["ai"]);
    assert.deepEqual([...bare(join(dist, "langchain.js"))].filter((s) => !s.startsWith("node:")), ["@langchain/core/tools"]);
    for (const f of ["express.js", "hono.js"]) assert.deepEqual([...bare(join(dist, f))].filter((s) => !s.startsWith("node:")), [], f);
    const pkg = JSON.parse(readFileSync(join(SDK_DIR, "package.json"), "utf8")) as { dependencies?: object };
    assert.equal(pkg.dependencies, undefined, "no runtime dependency");
  });
});
