/**
 * A caller: runs a capability (or, with --intent, the caller's words) and
 * prints the job once it has ended; with --direct, looks the capability up
 * and calls the best agent itself (lookup mode).
 *
 *   node dist-test/examples/caller.js text.shout '{"text": "hello"}'
 *   node dist-test/examples/caller.js --intent "make this text loud" '{"text": "hello"}'
 *   node dist-test/examples/caller.js --direct text.shout '{"text": "hello"}'
 */

import { Client } from "agentreach";

const args = process.argv.slice(2);
const mode = args[0] === "--intent" || args[0] === "--direct" ? args.shift() : undefined;
const [what = "text.shout", payload = '{"text": "hello"}'] = args;
const client = new Client(); // AGENTREACH_URL (default http://127.0.0.1:8080), AGENTREACH_KEY

try {
  if (mode === "--direct") {
    const res = await client.invoke(what, JSON.parse(payload));
    console.log(JSON.stringify({ status: res.status, result: res.result, agent_id: res.agentId, attempts: res.attempts.length }));
  } else {
    if (mode === "--intent") {
      const how = await client.resolve(what);
      console.error(`"${what}" → ${how.capability} (${how.resolver}, confidence ${how.confidence.toFixed(2)}): ${how.reason}`);
    }
    const job =
      mode === "--intent"
        ? await client.runIntent(what, JSON.parse(payload), { timeoutMs: 60_000 })
        : await client.run(what, JSON.parse(payload), { timeoutMs: 60_000 });
    console.log(JSON.stringify({ status: job.status, result: job.result ?? null, biz_code: job.biz_code ?? null, agent_id: job.agent_id, attempts: job.attempts }));
  }
} finally {
  await client.close();
}
