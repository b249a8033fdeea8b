/**
 * A push agent: serves `text.shout` on 127.0.0.1:8001 (PORT), and publishes
 * what it does so that intents like "make this text loud" resolve to it.
 *
 *   AGENTREACH_KEY=ark_... node dist-test/examples/push-agent.js
 */

import { Agent, failure } from "agentreach";

const agent = new Agent({
  agentId: process.env.AGENT_ID ?? "shouter-1",
  maxConcurrent: 8,
  capabilityInfo: {
    "text.shout": {
      title: "Shout a text",
      description: "Answers the text in capitals with an exclamation mark.",
      examples: ["make this text loud", "shout hello"],
    },
  },
});

agent.handle("text.shout", async (job) => {
  const { text } = (job.payload ?? {}) as { text?: unknown };
  if (typeof text !== "string") return failure("no_text"); // FAILED with a biz_code: not retried
  return { shout: text.toUpperCase() + "!" }; // SUCCESS with this result
});

const endpoint = await agent.listen(Number(process.env.PORT ?? 8001), "127.0.0.1");
await agent.waitRegistered();
console.log(`push agent ${agent.agentId} serves text.shout at ${endpoint}`);

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    // Offline first (no new work), then the jobs held finish, then exit.
    void agent.stop().then(() => process.exit(0));
  });
}
