/**
 * Lookup mode against the real service: a caller looks a capability up, calls
 * the best candidate directly with its grant, fails over from a hung agent
 * (timed out) and a dead one (connection refused), quarantines both, learns a
 * per-call timeout from observed latencies, and reports every outcome into
 * the agents' figures. Push agents take direct calls on their own grant only.
 */

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { Agent, Client, NoCandidates, type PushAgentOptions } from "../src/index.js";
import { Service, freePort, startService, stopService, unique, waitUntil } from "./harness.js";

let svc: Service;

before(async () => {
  svc = await startService();
});

after(async () => {
  if (svc) await stopService(svc);
});

function agent(o: Partial<PushAgentOptions> & { namespace: string }): Agent {
  // A long TTL, so a loaded machine's late heartbeat does not take a candidate out of the ranking mid-test.
  return new Agent({ agentId: unique("direct"), url: svc.url, ttlSeconds: 20, shutdownGraceMs: 2000, onError: () => undefined, ...o });
}

async function directCounts(ns: string): Promise<Record<string, { attempted: number; delivered: number; succeeded: number; failed: number }>> {
  const r = await svc.api("GET", `/v1/metrics/agents?window=5m&namespace=${encodeURIComponent(ns)}`);
  assert.equal(r.status, 200);
  return Object.fromEntries((r.body.agents as { agent_id: string; direct: never }[]).map((a) => [a.agent_id, a.direct]));
}

describe("lookup mode", () => {
  test("invoke fails over from a hung and a dead agent, quarantines them, and reports every call", async () => {
    const ns = unique("ns");
    const cap = unique("cap");
    const seen: { direct: boolean; attempt: number; jobId: string }[] = [];
    const good = agent({ namespace: ns, weight: 10 }).handle(cap, (job) => {
      seen.push({ direct: job.direct, attempt: job.attempt, jobId: job.jobId });
      return { by: "good", n: (job.payload as { n: number }).n };
    });
    // Hung: its endpoint takes the call and never answers (an SDK agent would
    // answer 503 at its own deadline, a race with the caller's clock); it
    // heartbeats and is probed at the good agent's address.
    const hangs = createServer(() => undefined);
    await new Promise<void>((r) => hangs.listen(0, "127.0.0.1", r));
    await good.listen();
    const hung = agent({ namespace: ns, weight: 90, endpoint: `http://127.0.0.1:${(hangs.address() as AddressInfo).port}/`, healthUrl: good.endpoint })
      .handle(cap, () => "never");
    hung.start();
    // Dead: it heartbeats (and is probed at the good agent's address) but nothing listens at its endpoint.
    const dead = agent({ namespace: ns, weight: 50, endpoint: `http://127.0.0.1:${await freePort()}/`, healthUrl: good.endpoint }).handle(cap, () => "never");
    dead.start();
    const c = new Client({ url: svc.url, candidateTimeoutMs: 3000, reportIntervalMs: 3_600_000 });
    try {
      for (const a of [good, hung, dead]) {
        await a.waitRegistered();
        await svc.healthy(a.agentId, ns);
      }
      const want = [hung.agentId, dead.agentId, good.agentId];
      await waitUntil(async () => {
        const res = await c.lookup(cap, { namespace: ns, constraints: { protocol: "http" }, noCache: true });
        assert.ok(res.candidates.every((x) => x.grant && x.endpoint));
        return JSON.stringify(res.candidates.map((x) => [x.agent_id, x.state])) === JSON.stringify(want.map((id) => [id, "HEALTHY"]));
      }, "the three ranked by weight, HEALTHY");

      // The answer is cached: a second lookup does not ask the registry.
      const cached = await c.lookup(cap, { namespace: ns, constraints: { protocol: "http" } });
      assert.equal(cached.cached, true);
      assert.ok(cached.ttlMs > 0);

      const res = await c.invoke(cap, { n: 1 }, { namespace: ns });
      assert.deepEqual([res.status, res.agentId, res.namespace, res.result], ["SUCCESS", good.agentId, ns, { by: "good", n: 1 }]);
      // The hung endpoint says nothing by the caller's 3 s.
      const hungCode = res.attempts[0].statusCode;
      assert.equal(hungCode, 0, `the hung agent answered ${hungCode}`);
      assert.deepEqual(
        res.attempts.map((a) => [a.agentId, a.statusCode, a.reached]),
        [
          [hung.agentId, hungCode, false],
          [dead.agentId, 0, false],
          [good.agentId, 200, true],
        ],
      );
      assert.match(res.attempts[0].error ?? "", /no answer within 3000 ms/);
      assert.ok(res.attempts[0].latencyMs >= 2900 && res.attempts[0].latencyMs < 6000, `hung for ${res.attempts[0].latencyMs} ms`);
      assert.match(res.attempts[1].error ?? "", /ECONNREFUSED/);
      // The good agent got the third attempt of the invocation, marked direct.
      assert.deepEqual(seen.at(-1), { direct: true, attempt: 3, jobId: res.invocationId });
      assert.ok(c.memory.quarantined({ namespace: ns, agent_id: hung.agentId }));
      assert.ok(c.memory.quarantined({ namespace: ns, agent_id: dead.agentId }));

      // Quarantined, both are tried last: the next calls cost nothing.
      for (let n = 2; n <= 11; n++) {
        const again = await c.invoke(cap, { n }, { namespace: ns });
        assert.deepEqual(again.attempts.map((a) => a.agentId), [good.agentId]);
      }
      // Eleven answered calls taught the capability's latency: 3 × p99, bounded below by 1 s.
      assert.equal(c.memory.timeout(cap, 3000), 1000);

      await c.flush();
      await waitUntil(async () => {
        const m = await directCounts(ns);
        return (
          JSON.stringify([m[hung.agentId], m[dead.agentId], m[good.agentId]]) ===
          JSON.stringify([
            { attempted: 1, delivered: 0, succeeded: 0, failed: 0 },
            { attempted: 1, delivered: 0, succeeded: 0, failed: 0 },
            { attempted: 11, delivered: 11, succeeded: 11, failed: 0 },
          ])
        );
      }, "the reports in the agents' figures");

      // A client without quarantine that learned the latency gives the hung agent 1 s, not 3.
      const fresh = new Client({ url: svc.url, candidateTimeoutMs: 3000, quarantineMs: 0, reportIntervalMs: 3_600_000 });
      for (let i = 0; i < 10; i++) fresh.memory.answered(cap, 5);
      const third = await fresh.invoke(cap, { n: 12 }, { namespace: ns });
      assert.equal(third.agentId, good.agentId);
      if (third.attempts[0].statusCode !== 503) assert.match(third.attempts[0].error ?? "", /no answer within 1000 ms/); // the same race of clocks
      assert.equal(third.attempts[0].reached, false);
      assert.ok(third.attempts[0].latencyMs < 2500, `hung for ${third.attempts[0].latencyMs} ms`);
      await fresh.close();
    } finally {
      await c.close();
      for (const a of [good, hung, dead]) await a.stop();
      hangs.closeAllConnections();
      hangs.close();
    }
  });

  test("invoke with hedgeMs races a hung agent with the next: the first result wins", async () => {
    const ns = unique("ns");
    const cap = unique("cap");
    const release = new AbortController();
    const good = agent({ namespace: ns, weight: 10 }).handle(cap, () => ({ by: "good" }));
    const hung = agent({ namespace: ns, weight: 90 }).handle(cap, () => new Promise((r) => release.signal.addEventListener("abort", r)));
    await good.listen();
    await hung.listen();
    const c = new Client({ url: svc.url, candidateTimeoutMs: 60_000, reportIntervalMs: 3_600_000 });
    try {
      for (const a of [good, hung]) {
        await a.waitRegistered();
        await svc.healthy(a.agentId, ns);
      }
      await waitUntil(async () => {
        const res = await c.lookup(cap, { namespace: ns, constraints: { protocol: "http" }, noCache: true });
        return JSON.stringify(res.candidates.map((x) => x.agent_id)) === JSON.stringify([hung.agentId, good.agentId]);
      }, "the hung agent ranked first");
      const res = await c.invoke(cap, {}, { namespace: ns, hedgeMs: 100 });
      assert.deepEqual([res.status, res.agentId, res.result], ["SUCCESS", good.agentId, { by: "good" }]);
      // The hung call was still running when the good one answered: only the winner's attempt ended.
      assert.deepEqual(res.attempts.map((a) => [a.agentId, a.reached]), [[good.agentId, true]]);
    } finally {
      release.abort();
      await c.close();
      for (const a of [good, hung]) await a.stop();
    }
  });

  test("a push agent takes a direct call on its own grant only; no candidate answering is NoCandidates", async () => {
    const ns = unique("ns");
    const cap = unique("cap");
    let ran = 0;
    const a = agent({ namespace: ns }).handle(cap, () => ++ran);
    const b = agent({ namespace: ns }).handle(cap, () => ++ran);
    await a.listen();
    await b.listen();
    const c = new Client({ url: svc.url, reportIntervalMs: 3_600_000 });
    try {
      for (const x of [a, b]) {
        await x.waitRegistered();
        await svc.healthy(x.agentId, ns);
      }
      // The router's view trails the registry by a moment: ask until both are candidates.
      const res = await waitUntil(async () => {
        const r = await c.lookup(cap, { namespace: ns, limit: 5, noCache: true });
        return r.candidates.length === 2 ? r : null;
      }, "both agents as lookup candidates");
      const grants = Object.fromEntries(res.candidates.map((x) => [x.agent_id, x.grant]));
      assert.deepEqual(Object.keys(grants).sort(), [a.agentId, b.agentId].sort());
      const envelope = JSON.stringify({ job_id: crypto.randomUUID(), attempt: 1, trace_id: "", capability: cap, payload: {}, result_url: "" });
      const post = (grant: string) => fetch(a.endpoint as string, { method: "POST", body: envelope, headers: { "Content-Type": "application/json", "X-Reach-Grant": grant } });
      const own = await post(grants[a.agentId]);
      assert.equal(own.status, 200);
      assert.deepEqual(await own.json(), { status: "SUCCESS", result: 1 });
      const other = await post(grants[b.agentId]);
      assert.equal(other.status, 401);
      assert.match((await other.json()).error, /not signed for this agent/);
      assert.equal((await post("v1.e30.AAAA")).status, 401);
      assert.equal(ran, 1);

      await a.stop();
      await b.stop();
      await assert.rejects(c.invoke(unique("nobody"), {}, { namespace: ns }), (e: unknown) => e instanceof NoCandidates && e.attempts.length === 0);
    } finally {
      await c.close();
      await a.stop();
      await b.stop();
    }
  });
});
