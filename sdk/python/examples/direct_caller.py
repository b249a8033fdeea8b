"""A caller in lookup mode: look the capability's agents up, call the best one directly
(failing over to the next), print its answer; the outcome is reported when the client closes.

    export AGENTREACH_KEY=ark_dev_...           # a key with agents:lookup
    python examples/direct_caller.py text.shout '{"text": "hello"}'
"""

from __future__ import annotations

import json
import sys

from agentreach import AgentReachError, Client, NoCandidates


def main() -> int:
    capability = sys.argv[1] if len(sys.argv) > 1 else "text.shout"
    payload = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {"text": "hello"}
    try:
        with Client(candidate_timeout=10) as client:  # AGENTREACH_URL, AGENTREACH_KEY; close() sends the reports
            res = client.invoke(capability, payload)
    except NoCandidates as e:
        for a in e.attempts:
            print(f"  {a.agent_id} at {a.endpoint}: {a.error}", file=sys.stderr)
        print(f"direct_caller: {e}", file=sys.stderr)
        return 1
    except AgentReachError as e:
        print(f"direct_caller: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"status": res.status, "result": res.result, "biz_code": res.biz_code,
                      "agent_id": res.agent_id, "attempts": len(res.attempts),
                      "latency_ms": round(res.latency * 1000, 1)}))
    return 0 if res.succeeded else 2


if __name__ == "__main__":
    sys.exit(main())
