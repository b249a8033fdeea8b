"""A push agent: Agent-Reach POSTs each job to it.

    make run &                                  # the service on 127.0.0.1:8080; note the admin key
    export AGENTREACH_KEY=ark_dev_...           # a key with agents:write (the admin key will do)
    python examples/push_agent.py               # serves on 127.0.0.1:8001 (PORT to change)
    python examples/caller.py text.shout '{"text": "hello"}'          # brokered
    python examples/direct_caller.py text.shout '{"text": "hello"}'   # lookup mode: called directly

Ctrl-C (or SIGTERM) takes it offline, finishes what it holds, and stops.
"""

from __future__ import annotations

import asyncio
import logging
import os

from agentreach import Agent, JobContext, Result, failure, success

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is too much

agent = Agent(
    os.environ.get("AGENT_ID", "shouter-1"),
    max_concurrent=8,
    start_jitter=1.0,  # a fleet would keep the 10 s default
)


@agent.handler("text.shout")
async def shout(job: JobContext) -> Result:
    """Inline: the answer to the delivery is the result."""
    text = job.payload.get("text") if isinstance(job.payload, dict) else None
    if not isinstance(text, str):
        return failure("no_text", "send {\"text\": \"...\"}")
    return success({"shout": text.upper() + "!"})


@agent.handler("text.slow_reverse", accept=True)
async def slow_reverse(job: JobContext) -> dict[str, str]:
    """Accepted: answered 202 at once, the result is posted when done (a cancel ends the sleep)."""
    await asyncio.sleep(float(job.payload.get("seconds", 1)))
    return {"reversed": str(job.payload.get("text", ""))[::-1]}


if __name__ == "__main__":
    agent.run(host="127.0.0.1", port=int(os.environ.get("PORT", "8001")))
