"""A pull agent: no endpoint; it claims its work, so it runs behind NAT, on a laptop, in a notebook.

    export AGENTREACH_KEY=ark_dev_...
    python examples/pull_agent.py
    python examples/caller.py notes.summarize '{"text": "A long note. It goes on. And on."}'
"""

from __future__ import annotations

import logging
import os

from agentreach import JobContext, Worker

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is too much

worker = Worker(os.environ.get("AGENT_ID", "laptop-1"), concurrency=2, start_jitter=1.0)


@worker.handler("notes.summarize")
def summarize(job: JobContext) -> dict[str, object]:
    """A plain def runs in a thread: blocking work never holds up heartbeats or claims."""
    text = str(job.payload.get("text", "")) if isinstance(job.payload, dict) else str(job.payload)
    first = text.split(".")[0].strip()
    return {"summary": first, "words": len(text.split())}


if __name__ == "__main__":
    worker.run()
