"""A Python agent in its own process, for the tests that kill and restart one or send it signals.

    python agent_proc.py push|pull AGENT_ID CAPABILITY [--hang-first]

It prints ``STARTED <job_id> <attempt>`` when a handler starts; with
``--hang-first`` the first attempt of each job never ends (until the process
is killed). Server and key come from AGENTREACH_URL and AGENTREACH_KEY.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from agentreach import Agent, JobContext, Worker


def main() -> None:
    mode, agent_id, capability = sys.argv[1:4]
    hang_first = "--hang-first" in sys.argv
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    def work(job: JobContext) -> dict[str, object]:
        print(f"STARTED {job.job_id} {job.attempt}", flush=True)
        if hang_first and job.attempt == 1:
            threading.Event().wait()
        return {"pid": os.getpid(), "attempt": job.attempt}

    if mode == "push":
        agent = Agent(agent_id, start_jitter=0.2, ttl_seconds=5, shutdown_grace=5)
        agent.add_handler(capability, work)
        agent.run(port=0)
    else:
        worker = Worker(agent_id, claim_wait=2.0, start_jitter=0.2, ttl_seconds=5, shutdown_grace=5)
        worker.add_handler(capability, work)
        worker.run()


if __name__ == "__main__":
    main()
