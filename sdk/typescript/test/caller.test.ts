/**
 * The caller's side against the real service (authentication on, one wait per
 * key): run with wait_ms in one round trip, the polling fallback when the
 * service refuses the wait, typed errors, events, cancel and replay, callbacks
 * verified with the namespace's secret, intent (resolve with its explanation,
 * submit by intent), and the AI SDK and LangChain tools.
 */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { Agent, APIError, Client, SignatureError, WaitTimeout, failure, verifyCallback, type FetchLike } from "../src/index.js";
import { capabilityTool as aiTool, CapabilityFailed } from "../src/ai.js";
import { capabilityTool as langchainTool } from "../src/langchain.js";
import { Service, startService, stopService, unique, waitUntil } from "./harness.js";

let svc: Service;
let key: string;
let echoCap: string;
let echo: Agent;
let client: Client;

before(async () => {
  key = "ark_" + randomBytes(24).toString("hex");
  svc = await startService({ adminKey: key, extra: ["--waits-per-key", "1"] });
  client = new Client({ url: svc.url, apiKey: key });
  echoCap = unique("echo");
  echo = new Agent({ agentId: unique("echo-agent"), url: svc.url, apiKey: key, ttlSeconds: 10, shutdownGraceMs: 5000, onError: () => undefined });
  echo.handle(echoCap, (job) => {
    const p = job.payload as { fail?: string; input?: string };
    if (p?.fail) return failure(p.fail);
    return { echo: job.payload };
  });
  await echo.listen();
  await echo.waitRegistered();
  await svc.healthy(echo.agentId);
});

after(async () => {
  await echo?.stop();
  await client?.close();
  if (svc) await stopService(svc);
});

/** A client whose requests to the service are recorded (method, path, status). */
function recording(): { client: Client; calls: string[] } {
  const calls: string[] = [];
  const f: FetchLike = async (input, init) => {
    const resp = await fetch(input, init);
    const u = new URL(String(input));
    calls.push(`${init?.method ?? "GET"} ${u.pathname}${u.search} ${resp.status}`);
    return resp;
  };
  return { client: new Client({ url: svc.url, apiKey: key, fetch: f }), calls };
}

describe("caller", () => {
  test("run answers the ended job in one round trip: a submit with wait_ms answered 200", async () => {
    const { client: c, calls } = recording();
    const job = await c.run(echoCap, { n: 1 }, { timeoutMs: 20_000 });
    assert.equal(job.status, "SUCCESS");
    assert.deepEqual(job.result, { echo: { n: 1 } });
    assert.equal(job.agent_id, echo.agentId);
    assert.deepEqual(calls, ["POST /v1/jobs 200"]);
  });

  test("a wait the service refuses (429: the key's one wait is taken) falls back to polling", async () => {
    const idle = unique("nobody");
    const held = await client.submit(idle, {}, { route_wait_ms: 60_000 });
    // This key's one wait: a read held until the job ends (started again
    // while the wait of an earlier request is still being let go).
    let holding: Promise<unknown> | undefined;
    let settled = true;
    const hold = () => {
      settled = false;
      holding = client.get(held.job_id, { waitMs: 15_000 }).then(
        (job) => job,
        (err) => err,
      ).finally(() => (settled = true));
    };
    const { client: c, calls } = recording();
    await waitUntil(async () => {
      if (settled) hold();
      try {
        await c.get(held.job_id, { waitMs: 10 });
        return false;
      } catch (err) {
        return err instanceof APIError && err.status === 429;
      }
    }, "the key's wait to be held");
    calls.length = 0;
    const job = await c.run(echoCap, { n: 2 }, { timeoutMs: 20_000, pollMs: 20 });
    assert.equal(job.status, "SUCCESS");
    assert.deepEqual(job.result, { echo: { n: 2 } });
    assert.match(calls[0], /^POST \/v1\/jobs 429$/);
    assert.match(calls[1], /^POST \/v1\/jobs 202$/, "the same submit again, without wait_ms");
    assert.ok(calls.slice(2).every((c) => /^GET \/v1\/jobs\/[^?]+ 200$/.test(c)), `then plain polls: ${calls.join(", ")}`);
    await client.cancel(held.job_id);
    assert.equal(((await holding) as { status?: string }).status, "CANCELLED", "the held wait ends with the job");
  });

  test("errors carry the service's status, code, message and field", async () => {
    await assert.rejects(client.submit(unique("x"), {}, { timeout_ms: 1 }), (err: unknown) => {
      assert.ok(err instanceof APIError);
      assert.deepEqual([err.status, err.code, err.field], [400, "invalid_argument", "timeout_ms"]);
      assert.match(err.serviceMessage, /timeout_ms/);
      return true;
    });
    await assert.rejects(client.get("01a00000-0000-7000-8000-000000000000"), (err: unknown) => err instanceof APIError && err.code === "not_found" && err.status === 404);
    const anonymous = new Client({ url: svc.url, apiKey: "" });
    await assert.rejects(anonymous.get("01a00000-0000-7000-8000-000000000000"), (err: unknown) => {
      assert.ok(err instanceof APIError && err.status === 401 && err.code === "unauthenticated");
      assert.match(err.message, /needs an API key/);
      return true;
    });
  });

  test("an idempotency key makes a repeated submit the same job; get, wait, events and cancel", async () => {
    const cap = unique("nobody");
    const a = await client.submit(cap, { n: 1 }, { idempotencyKey: "k-" + cap, route_wait_ms: 60_000 });
    const b = await client.submit(cap, { n: 1 }, { idempotencyKey: "k-" + cap, route_wait_ms: 60_000 });
    assert.equal(a.job_id, b.job_id);
    await assert.rejects(client.submit(cap, { n: 2 }, { idempotencyKey: "k-" + cap }), (e: unknown) => e instanceof APIError && e.code === "conflict");
    const job = await client.get(a.job_id);
    assert.deepEqual([job.job_id, job.capability, job.status], [a.job_id, cap, "SUBMITTED"]);
    await assert.rejects(client.wait(a.job_id, { timeoutMs: 300 }), (e: unknown) => e instanceof WaitTimeout && (e.job as { job_id: string }).job_id === a.job_id);
    assert.equal((await client.cancel(a.job_id, "test over")).status, "CANCELLED");
    await assert.rejects(client.cancel(a.job_id), (e: unknown) => e instanceof APIError && e.status === 409);
    const types = (await client.events(a.job_id)).map((e) => e.type);
    assert.equal(types[0], "SUBMITTED");
    assert.equal(types.at(-1), "CANCELLED");
  });

  test("a dead-lettered job is replayed as a new job", async () => {
    const cap = unique("dead");
    const sub = await client.submit(cap, { x: 1 }, { max_attempts: 1, route_wait_ms: 100 });
    const dead = await client.wait(sub.job_id, { timeoutMs: 20_000 });
    assert.equal(dead.status, "DEAD_LETTER");
    const again = await client.replay(sub.job_id);
    assert.notEqual(again.job_id, sub.job_id);
    assert.equal((await client.get(again.job_id)).replay_of, sub.job_id);
    await client.cancel(again.job_id);
  });

  test("a callback verifies with the namespace's secret; a forged one does not", async () => {
    const got: { headers: IncomingHttpHeaders; body: Buffer }[] = [];
    const server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      got.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const sub = await client.submit(unique("called"), { x: 1 }, { callback_url: url, route_wait_ms: 60_000 });
      await client.cancel(sub.job_id);
      await waitUntil(() => got.length > 0, "the callback", 20_000);
      const secrets = await client.callbackSecrets();
      assert.ok(secrets.length && secrets.every((s) => s.startsWith("whsec_")));
      const { headers, body } = got[0];
      const ev = verifyCallback(secrets, body, headers);
      assert.deepEqual([ev.job_id, ev.status, ev.trace_id], [sub.job_id, "CANCELLED", sub.trace_id]);
      assert.equal(ev.webhook_id, headers["webhook-id"]);
      const forged = JSON.stringify({ ...JSON.parse(body.toString()), status: "SUCCESS" });
      assert.throws(() => verifyCallback(secrets, forged, headers), SignatureError);
      assert.throws(() => verifyCallback("whsec_" + Buffer.alloc(24, 7).toString("base64"), body, headers), SignatureError);
      assert.throws(() => verifyCallback(secrets, body, headers, { now: Math.floor(Date.now() / 1000) + 3600 }), /too old/);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe("intent", () => {
  test("an agent publishes what its capability does; a caller resolves an intent to it, with the explanation, and runs by intent", async () => {
    const ns = unique("ns");
    const cap = unique("parcel.track");
    const c = new Client({ url: svc.url, apiKey: key, namespace: ns });
    const agent = new Agent({
      agentId: unique("tracker"),
      url: svc.url,
      apiKey: key,
      namespace: ns,
      ttlSeconds: 10,
      shutdownGraceMs: 5000,
      onError: () => undefined,
      capabilityInfo: {
        [cap]: { title: "Track a parcel", description: "Says where a parcel is and when it arrives.", examples: ["where is my parcel", "我的包裹在哪里"] },
      },
    }).handle(cap, (job) => ({ capability: job.capability }));
    await agent.listen();
    try {
      await agent.waitRegistered();
      await svc.healthy(agent.agentId, ns);
      const res = await waitUntil(async () => {
        try {
          return await c.resolve("where is my parcel?");
        } catch (err) {
          assert.ok(err instanceof APIError && err.code === "ambiguous_intent", String(err));
          return undefined;
        }
      }, "the catalogue to hold the agent's words");
      assert.equal(res.capability, cap);
      assert.ok(res.reason && res.candidates.length && res.steps.length, JSON.stringify(res));
      assert.equal(res.namespace, ns);

      const job = await c.runIntent("我的包裹在哪里", { n: 1 }, { timeoutMs: 20_000 });
      assert.deepEqual([job.status, job.agent_id, job.capability, job.result], ["SUCCESS", agent.agentId, cap, { capability: cap }]);
      assert.equal(job.intent, "我的包裹在哪里");
      assert.ok((await c.events(job.job_id)).some((e) => e.type === "INTENT_RESOLVED"));

      await assert.rejects(c.resolve("bake a chocolate cake"), (e: unknown) => e instanceof APIError && e.code === "ambiguous_intent" && e.status === 422);
    } finally {
      await agent.stop();
      await c.close();
    }
  });
});

describe("tool adapters", () => {
  test("the AI SDK tool runs the capability and answers its result", async () => {
    const t = aiTool(client, echoCap, { description: "Echoes its input.", timeoutMs: 20_000 });
    assert.equal(t.description, "Echoes its input.");
    assert.ok(t.execute);
    const out = await t.execute({ input: "hello" }, { toolCallId: "call-1", messages: [] });
    assert.deepEqual(out, { echo: { input: "hello" } });
    await assert.rejects(
      Promise.resolve(t.execute({ input: "x", fail: "no_such_parcel" }, { toolCallId: "call-2", messages: [] })),
      (e: unknown) => e instanceof CapabilityFailed && e.job.status === "FAILED" && /no_such_parcel/.test(e.message),
    );
  });

  test("the LangChain tool runs the capability and answers its result as text", async () => {
    const t = langchainTool(client, echoCap, {
      name: "echo",
      description: "Echoes its input.",
      schema: { type: "object", properties: { input: { type: "string" } }, required: ["input"] },
      timeoutMs: 20_000,
    });
    assert.equal(t.name, "echo");
    const out = await t.invoke({ input: "hello" });
    assert.deepEqual(JSON.parse(String(out)), { echo: { input: "hello" } });
  });
});
