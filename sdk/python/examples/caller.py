"""A caller: submit a job by capability, wait for it, print the outcome.

    export AGENTREACH_KEY=ark_dev_...           # a key with jobs:submit:<capability> and jobs:read
    python examples/caller.py text.shout '{"text": "hello"}'
"""

from __future__ import annotations

import json
import sys

from agentreach import AgentReachError, Client


def main() -> int:
    capability = sys.argv[1] if len(sys.argv) > 1 else "text.shout"
    payload = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {"text": "hello"}
    try:
        with Client() as client:  # AGENTREACH_URL (default http://127.0.0.1:8080), AGENTREACH_KEY
            sub = client.submit(capability, payload, timeout_ms=30_000)
            print(f"submitted {sub.job_id} (trace {sub.trace_id})", file=sys.stderr)
            job = client.wait(sub.job_id, timeout=60)
    except AgentReachError as e:
        print(f"caller: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"status": job.status, "result": job.result, "biz_code": job.biz_code,
                      "agent_id": job.agent_id, "attempts": job.attempts}))
    return 0 if job.succeeded else 2


if __name__ == "__main__":
    sys.exit(main())
