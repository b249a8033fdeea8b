/**
 * The examples against the real service, run as a user would run them
 * (`node dist-test/examples/*.js`, importing the built package by its name),
 * configured by AGENTREACH_URL only.
 */

import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { SDK_DIR, Service, freePort, startService, stopService, unique, waitUntil } from "./harness.js";

const run = promisify(execFile);
const EXAMPLES = join(SDK_DIR, "dist-test", "examples");
let svc: Service;
const procs: ChildProcess[] = [];

before(async () => {
  svc = await startService();
});

after(async () => {
  for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
  if (svc) await stopService(svc);
});

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, AGENTREACH_URL: svc.url, AGENTREACH_KEY: "", ...extra };
}

/** Starts an example that prints one line once it is registered; answers the process and that line. */
async function serve(file: string, extra: Record<string, string>): Promise<{ proc: ChildProcess; line: string }> {
  const proc = spawn(process.execPath, [join(EXAMPLES, file)], { env: env(extra), stdio: ["ignore", "pipe", "pipe"] });
  procs.push(proc);
  let out = "";
  let err = "";
  proc.stdout?.on("data", (d) => (out += d));
  proc.stderr?.on("data", (d) => (err += d));
  const line = await waitUntil(() => {
    if (proc.exitCode !== null) throw new Error(`${file} exited with ${proc.exitCode}: ${err}`);
    return out.split("\n")[0] && out.includes("\n") ? out.split("\n")[0] : "";
  }, `${file} to register`);
  return { proc, line };
}

async function stop(proc: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  proc.kill("SIGTERM");
  return exited;
}

async function caller(...args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run(process.execPath, [join(EXAMPLES, "caller.js"), ...args], { env: env(), timeout: 60_000 });
  return JSON.parse(stdout.trim().split("\n").at(-1) as string) as Record<string, unknown>;
}

describe("examples", () => {
  test("the push agent, the pull worker and the caller work together against the service", async () => {
    const pushId = unique("shouter");
    const pullId = unique("summarizer");
    const push = await serve("push-agent.js", { PORT: String(await freePort()), AGENT_ID: pushId });
    assert.match(push.line, new RegExp(`push agent ${pushId} serves text.shout at http://127.0.0.1:\\d+/`));
    const pull = await serve("pull-worker.js", { AGENT_ID: pullId });
    assert.match(pull.line, /claims notes.summarize/);
    await svc.healthy(pushId);

    assert.deepEqual(await caller("text.shout", '{"text": "hello"}'), {
      status: "SUCCESS",
      result: { shout: "HELLO!" },
      biz_code: null,
      agent_id: pushId,
      attempts: 1,
    });
    assert.deepEqual(await caller("text.shout", "{}"), { status: "FAILED", result: null, biz_code: "no_text", agent_id: pushId, attempts: 1 });
    assert.deepEqual(await caller("notes.summarize", '{"text": "one two three four five six"}'), {
      status: "SUCCESS",
      result: { summary: "one two three four five", words: 6 },
      biz_code: null,
      agent_id: pullId,
      attempts: 1,
    });
    assert.deepEqual(await caller("--direct", "text.shout", '{"text": "hi"}'), { status: "SUCCESS", result: { shout: "HI!" }, agent_id: pushId, attempts: 1 });
    // By intent, once the catalogue holds the agent's words.
    const byIntent = await waitUntil(async () => {
      try {
        return await caller("--intent", "make this text loud", '{"text": "hey"}');
      } catch {
        return undefined;
      }
    }, "the intent to resolve");
    assert.deepEqual(byIntent, { status: "SUCCESS", result: { shout: "HEY!" }, biz_code: null, agent_id: pushId, attempts: 1 });

    // SIGTERM: each goes offline and exits 0.
    assert.equal(await stop(push.proc), 0);
    assert.equal(await stop(pull.proc), 0);
    for (const id of [pushId, pullId]) assert.equal((await svc.api("GET", `/v1/agents/${id}`)).body.state, "OFFLINE");
  });
});
