/**
 * A pull worker: claims `notes.summarize` jobs (no endpoint: it works from
 * behind a NAT or a laptop), two at a time, reporting progress as it goes.
 *
 *   AGENTREACH_KEY=ark_... node dist-test/examples/pull-worker.js
 */

import { Worker } from "agentreach";

const worker = new Worker({ agentId: process.env.AGENT_ID ?? "summarizer-1", concurrency: 2, claimWaitMs: 20_000 });

worker.handle("notes.summarize", async (job) => {
  const { text } = (job.payload ?? {}) as { text?: string };
  const words = String(text ?? "").split(/\s+/).filter(Boolean);
  await job.progress({ words: words.length }); // the caller reads it in the job's events
  // A long handler's deadline is extended by the SDK itself; job.signal aborts on a cancel.
  return { summary: words.slice(0, 5).join(" "), words: words.length };
});

worker.start();
await worker.waitRegistered();
console.log(`pull worker ${worker.agentId} claims notes.summarize`);

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    // Gives back what it claimed and has not started, finishes the rest, goes offline.
    void worker.stop().then(() => process.exit(0));
  });
}
