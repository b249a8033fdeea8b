/**
 * Push agents and pull workers against the real service: deliveries routed to
 * a push agent and their signatures (a bad one refused), 503 with Retry-After
 * at max_concurrent, accepted work reported later, the Express and Hono
 * adapters; a pull worker claiming, keeping a long job, and giving back
 * unstarted work on shutdown.
 */

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import express from "express";
import { Hono } from "hono";
import { Agent, Client, Refused, Worker, deliveryKey, failure, sign, type JobContext, type PushAgentOptions, type WorkerOptions } from "../src/index.js";
import { agentMiddleware } from "../src/express.js";
import { agentRoute } from "../src/hono.js";
import { Service, startService, stopService, unique, waitUntil } from "./harness.js";

let svc: Service;
let client: Client;

before(async () => {
  svc = await startService();
  client = new Client({ url: svc.url });
});

after(async () => {
  await client?.close();
  if (svc) await stopService(svc);
});

function pushAgent(o: Partial<PushAgentOptions> = {}): Agent {
  return new Agent({ agentId: unique("push"), url: svc.url, ttlSeconds: 5, shutdownGraceMs: 5000, onError: () => undefined, ...o });
}

function pullWorker(o: Partial<WorkerOptions> = {}): Worker {
  return new Worker({ agentId: unique("pull"), url: svc.url, ttlSeconds: 5, claimWaitMs: 2000, shutdownGraceMs: 5000, onError: () => undefined, ...o });
}

/** A gate a handler waits on until the test opens it. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** A signed envelope for `agent`, as Agent-Reach would send it (written independently of the agent's own check). */
function delivery(capability: string, token: string, o: { key?: Buffer; timestamp?: number } = {}) {
  const body = JSON.stringify({ job_id: crypto.randomUUID(), attempt: 1, trace_id: "0".repeat(31) + "1", capability, payload: { n: 1 }, deadline: new Date(Date.now() + 30_000).toISOString(), result_url: "" });
  const id = "msg_" + Math.random().toString(16).slice(2);
  const ts = o.timestamp ?? Math.floor(Date.now() / 1000);
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "webhook-id": id,
    "webhook-timestamp": String(ts),
    "webhook-signature": sign(o.key ?? deliveryKey(token), id, ts, body),
  };
  return { body, headers };
}

describe("push agent", () => {
  test("a job is routed to it, the signed delivery verified, and the inline result comes back", async () => {
    const cap = unique("echo");
    const seen: JobContext[] = [];
    const agent = pushAgent().handle(cap, (job) => {
      seen.push(job);
      return { echo: job.payload, attempt: job.attempt };
    });
    await agent.listen();
    try {
      await agent.waitRegistered();
      await svc.healthy(agent.agentId);
      const job = await client.run(cap, { n: 7 }, { timeoutMs: 20_000 });
      assert.equal(job.status, "SUCCESS");
      assert.deepEqual(job.result, { echo: { n: 7 }, attempt: 1 });
      assert.equal(job.agent_id, agent.agentId);
      assert.equal(seen.length, 1);
      assert.equal(seen[0].jobId, job.job_id);
      assert.equal(seen[0].traceId, job.trace_id);
      assert.ok(seen[0].delivery.traceparent?.includes(job.trace_id));
      assert.ok(seen[0].deadline && seen[0].deadline > Date.now() - 60_000);

      // A business failure is FAILED with its code, on its one attempt.
      const failing = unique("fails");
      const agent2 = pushAgent().handle(failing, () => failure("out_of_paper", { tray: 2 }));
      await agent2.listen();
      try {
        await agent2.waitRegistered();
        await svc.healthy(agent2.agentId);
        const failed = await client.run(failing, {}, { timeoutMs: 20_000 });
        assert.deepEqual([failed.status, failed.biz_code, failed.result, failed.attempts], ["FAILED", "out_of_paper", { tray: 2 }, 1]);
      } finally {
        await agent2.stop();
      }
    } finally {
      await agent.stop();
    }
    assert.equal((await svc.api("GET", `/v1/agents/${agent.agentId}`)).body.state, "OFFLINE");
  });

  test("a delivery with a bad, missing or stale signature is refused; a good one is served", async () => {
    const cap = unique("signed");
    let ran = 0;
    const agent = pushAgent().handle(cap, () => ++ran);
    const endpoint = await agent.listen();
    try {
      await agent.waitRegistered();
      const [token] = agent.signingTokens();
      const post = (d: { body: string; headers: Record<string, string> }) => fetch(endpoint, { method: "POST", body: d.body, headers: d.headers });

      const forged = await post(delivery(cap, token, { key: deliveryKey("art_not-the-agents-token") }));
      assert.equal(forged.status, 401);
      assert.match((await forged.json()).error, /signature does not verify/);

      const tampered = delivery(cap, token);
      tampered.body = tampered.body.replace('"n":1', '"n":2');
      assert.equal((await post(tampered)).status, 401);

      const stale = await post(delivery(cap, token, { timestamp: Math.floor(Date.now() / 1000) - 600 }));
      assert.equal(stale.status, 401);
      assert.match((await stale.json()).error, /too old/);

      const unsigned = await fetch(endpoint, { method: "POST", body: delivery(cap, token).body, headers: { "Content-Type": "application/json" } });
      assert.equal(unsigned.status, 401);
      assert.equal(ran, 0, "no refused delivery ran the handler");

      const good = await post(delivery(cap, token));
      assert.equal(good.status, 200);
      assert.deepEqual(await good.json(), { status: "SUCCESS", result: 1 });
      assert.equal((await fetch(endpoint)).status, 200, "the probe answers");
    } finally {
      await agent.stop();
    }
  });

  test("at max_concurrent it answers 503 with Retry-After; accepted work answers 202 and reports later", async () => {
    const busy = unique("busy");
    const slow = unique("slow");
    const g = gate();
    const started: string[] = [];
    const agent = pushAgent({ maxConcurrent: 1 })
      .handle(busy, async () => {
        await g.wait;
        return "late";
      })
      .handle(
        slow,
        async (job) => {
          started.push(job.jobId);
          await g.wait;
          return { done: job.jobId };
        },
        { accept: true },
      );
    const endpoint = await agent.listen();
    try {
      await agent.waitRegistered();
      await svc.healthy(agent.agentId);
      const sub = await client.submit(slow, {});
      await waitUntil(() => started.length === 1, "the accepted job to start");
      await waitUntil(async () => (await client.get(sub.job_id)).status === "DELIVERED", "DELIVERED after the 202");
      assert.equal(agent.inFlight, 1);

      // Its one slot is held: a delivery now is "not now".
      const [token] = agent.signingTokens();
      const d = delivery(busy, token);
      const full = await fetch(endpoint, { method: "POST", body: d.body, headers: d.headers });
      assert.equal(full.status, 503);
      assert.equal(full.headers.get("retry-after"), "1");

      g.open();
      const job = await client.wait(sub.job_id, { timeoutMs: 20_000 });
      assert.equal(job.status, "SUCCESS");
      assert.deepEqual(job.result, { done: sub.job_id });
      assert.equal(job.attempts, 1);
    } finally {
      g.open();
      await agent.stop();
    }
  });

  test("a refusal is a delivery that did not happen: retried", async () => {
    const cap = unique("picky");
    const agent = pushAgent().handle(cap, (job) => {
      if (job.attempt === 1) throw new Refused();
      return "ok";
    });
    await agent.listen();
    try {
      await agent.waitRegistered();
      await svc.healthy(agent.agentId);
      const job = await client.run(cap, {}, { backoff_base_ms: 100, backoff_max_ms: 200, timeoutMs: 20_000 });
      assert.deepEqual([job.status, job.result, job.attempts], ["SUCCESS", "ok", 2]);
      const reasons = (await client.events(job.job_id)).filter((e) => e.type === "ATTEMPT_FAILED").map((e) => (e.data as { reason?: string }).reason);
      assert.deepEqual(reasons, ["http_503"]);
    } finally {
      await agent.stop();
    }
  });

  test("mounted in Express and in Hono, the agent serves its jobs", async () => {
    const servers: Server[] = [];
    const listen = async (s: Server) => {
      servers.push(s);
      await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
      return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
    };
    const expressCap = unique("viaexpress");
    const honoCap = unique("viahono");
    const agents: Agent[] = [];
    try {
      // Express: the agent as middleware at /agent.
      const app = express();
      const base1 = await listen(createServer(app));
      const viaExpress = pushAgent({ endpoint: base1 + "/agent" }).handle(expressCap, (job) => ({ via: "express", payload: job.payload }));
      app.all("/agent", agentMiddleware(viaExpress));
      agents.push(viaExpress);
      viaExpress.start();

      // Hono: the agent as a route; a small node:http → fetch bridge serves the app.
      const hono = new Hono();
      const bridge = createServer(async (req, res) => {
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
        const body = req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks);
        const resp = await hono.fetch(new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body }));
        res.writeHead(resp.status, Object.fromEntries(resp.headers));
        res.end(Buffer.from(await resp.arrayBuffer()));
      });
      const base2 = await listen(bridge);
      const viaHono = pushAgent({ endpoint: base2 + "/agent" }).handle(honoCap, (job) => ({ via: "hono", payload: job.payload }));
      hono.on(["GET", "POST"], "/agent", agentRoute(viaHono));
      agents.push(viaHono);
      viaHono.start();

      for (const a of agents) {
        await a.waitRegistered();
        await svc.healthy(a.agentId);
      }
      const [a, b] = await Promise.all([client.run(expressCap, { x: 1 }, { timeoutMs: 20_000 }), client.run(honoCap, { x: 2 }, { timeoutMs: 20_000 })]);
      assert.deepEqual([a.status, a.result], ["SUCCESS", { via: "express", payload: { x: 1 } }]);
      assert.deepEqual([b.status, b.result], ["SUCCESS", { via: "hono", payload: { x: 2 } }]);

      // The Hono route checks signatures too.
      const bad = delivery(honoCap, "art_wrong");
      assert.equal((await fetch(base2 + "/agent", { method: "POST", body: bad.body, headers: bad.headers })).status, 401);
    } finally {
      for (const a of agents) await a.stop();
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    }
  });
});

describe("pull worker", () => {
  test("it claims a job, runs it and reports the result", async () => {
    const cap = unique("summarize");
    const worker = pullWorker({ concurrency: 2 }).handle(cap, (job) => ({ summary: String((job.payload as { text: string }).text).slice(0, 5) }));
    worker.start();
    try {
      await worker.waitRegistered();
      const job = await client.run(cap, { text: "text number one" }, { timeoutMs: 20_000 });
      assert.deepEqual([job.status, job.result, job.agent_id], ["SUCCESS", { summary: "text " }, worker.agentId]);
      const delivered = (await client.events(job.job_id)).find((e) => e.type === "DELIVERED");
      assert.equal((delivered?.data as { claimed?: boolean }).claimed, true);
      assert.ok(worker.claims >= 1);
    } finally {
      await worker.stop();
    }
  });

  test("a worker the registry forgot registers again and claims on", async () => {
    const cap = unique("again");
    const worker = pullWorker().handle(cap, () => "still here");
    worker.start();
    try {
      await worker.waitRegistered();
      const [token] = worker.signingTokens();
      assert.equal((await svc.api("DELETE", `/v1/agents/${worker.agentId}`)).status, 204);
      await waitUntil(() => worker.registered && worker.signingTokens()[0] !== token, "a new registration", 10_000);
      assert.deepEqual(worker.signingTokens(), [worker.signingTokens()[0], token], "the old token still verifies what was signed for it");
      const job = await client.run(cap, {}, { timeoutMs: 20_000 });
      assert.deepEqual([job.status, job.result], ["SUCCESS", "still here"]);
    } finally {
      await worker.stop();
    }
  });

  test("a long handler is kept past its timeout by progress reports it makes by itself", async () => {
    const cap = unique("long");
    const g = gate();
    const worker = pullWorker().handle(cap, async () => {
      await g.wait;
      return { done: true };
    });
    worker.start();
    try {
      await worker.waitRegistered();
      const sub = await client.submit(cap, {}, { timeout_ms: 2400, max_attempts: 1 });
      const progressed = async () => (await client.events(sub.job_id)).filter((e) => e.type === "PROGRESS").length >= 2;
      await waitUntil(progressed, "two progress reports extending the deadline", 20_000);
      // Heartbeats come on the interval the registration answered (a third of the 5 s TTL), not the default 10 s.
      assert.ok(worker.heartbeatIntervalMs < 5000, `every ${worker.heartbeatIntervalMs} ms`);
      await waitUntil(() => worker.heartbeats >= 1, "a heartbeat", 10_000);
      g.open();
      const job = await client.wait(sub.job_id, { timeoutMs: 20_000 });
      assert.deepEqual([job.status, job.attempts, job.result], ["SUCCESS", 1, { done: true }]);
    } finally {
      g.open();
      await worker.stop();
    }
  });

  test("on shutdown it gives back unstarted work, and fails what outlives the grace", async () => {
    const cap = unique("handover");
    const started: string[] = [];
    const ends: (string | undefined)[] = [];
    const first = pullWorker({ concurrency: 1, prefetch: 1, shutdownGraceMs: 500 }).handle(cap, async (job) => {
      started.push(job.jobId);
      await new Promise((r) => job.signal.addEventListener("abort", r, { once: true }));
      ends.push(job.cancelReason);
      return "never reported";
    });
    const second = pullWorker({ concurrency: 2 }).handle(cap, () => "done by the second");
    first.start();
    let stopped = false;
    try {
      await first.waitRegistered();
      const a = await client.submit(cap, {}, { backoff_base_ms: 100, backoff_max_ms: 200 });
      await waitUntil(() => started.length === 1, "the first job to start");
      const b = await client.submit(cap, {});
      await waitUntil(() => first.healthReport().queue_length === 1, "a prefetched job");
      assert.deepEqual(started, [a.job_id]);
      await first.stop();
      stopped = true;
      assert.deepEqual(ends, ["shutdown"]);
      assert.equal((await svc.api("GET", `/v1/agents/${first.agentId}`)).body.state, "OFFLINE");

      second.start();
      const [ja, jb] = [await client.wait(a.job_id, { timeoutMs: 20_000 }), await client.wait(b.job_id, { timeoutMs: 20_000 })];
      assert.deepEqual([ja.status, ja.agent_id, ja.attempts], ["SUCCESS", second.agentId, 2]);
      assert.deepEqual([jb.status, jb.agent_id, jb.attempts], ["SUCCESS", second.agentId, 2]);
      const reasons = async (id: string) =>
        (await client.events(id)).filter((e) => e.type === "ATTEMPT_FAILED").map((e) => e.data as { reason?: string; error?: string });
      assert.deepEqual((await reasons(b.job_id)).map((d) => d.reason), ["released"]);
      const af = await reasons(a.job_id);
      assert.equal(af.length, 1);
      assert.notEqual(af[0].reason, "released");
      assert.match(JSON.stringify(af[0]), /shut down/);
    } finally {
      if (!stopped) await first.stop();
      await second.stop();
    }
  });
});
