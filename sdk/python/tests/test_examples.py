"""The examples run as a user runs them, against the service: each agent in its own process,
the caller and the LangChain tool side as scripts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import Service, free_port, unique, wait_until

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def env_for(service: Service, **extra: str) -> dict[str, str]:
    env = dict(os.environ, AGENTREACH_URL=service.url, PYTHONUNBUFFERED="1", **extra)
    env.pop("AGENTREACH_KEY", None)
    return env


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def start(service: Service, procs: list[subprocess.Popen[str]], script: str, agent_id: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, str(EXAMPLES / script)], text=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env_for(service, AGENT_ID=agent_id, PORT=str(free_port())))
    procs.append(p)
    return p


def healthy(service: Service, *agent_ids: str) -> None:
    def all_healthy() -> bool:
        with service.api() as api:
            for agent_id in agent_ids:
                r = api.get(f"/v1/agents/{agent_id}")
                if r.status_code != 200 or r.json()["state"] != "HEALTHY":
                    return False
        return True

    wait_until(all_healthy, 30, f"{', '.join(agent_ids)} to be HEALTHY")


def run(service: Service, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], text=True, capture_output=True, timeout=90, env=env_for(service))


def test_the_examples_run_against_the_service(service: Service, spawned: list[subprocess.Popen[str]]) -> None:
    ids = [unique("shouter"), unique("laptop"), unique("outliner")]
    push = start(service, spawned, "push_agent.py", ids[0])
    start(service, spawned, "pull_agent.py", ids[1])
    start(service, spawned, "langchain_agent.py", ids[2])
    healthy(service, *ids)

    out = run(service, str(EXAMPLES / "caller.py"), "text.shout", '{"text": "hello"}')
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["result"] == {"shout": "HELLO!"}

    # Lookup mode: the caller calls the agent itself, and reports the call.
    out = run(service, str(EXAMPLES / "direct_caller.py"), "text.shout", '{"text": "direct"}')
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert (answer["result"], answer["agent_id"], answer["attempts"]) == ({"shout": "DIRECT!"}, ids[0], 1)

    def reported() -> bool:
        with service.api() as api:
            rows = api.get("/v1/metrics/agents", params={"window": "5m"}).json()["agents"]
        return any(r["agent_id"] == ids[0] and r["direct"]["succeeded"] == 1 for r in rows)

    wait_until(reported, 15, "the direct call in the agent's figures")

    out = run(service, str(EXAMPLES / "caller.py"), "text.slow_reverse", '{"text": "abc", "seconds": 0.1}')
    assert out.returncode == 0 and json.loads(out.stdout)["result"] == {"reversed": "cba"}, out.stderr

    out = run(service, str(EXAMPLES / "caller.py"), "notes.summarize", '{"text": "First part. Second part."}')
    assert out.returncode == 0 and json.loads(out.stdout)["result"] == {"summary": "First part", "words": 4}

    out = run(service, str(EXAMPLES / "langchain_agent.py"), "--ask", "Routes jobs. Retries them.")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "- Routes jobs\n- Retries them"

    push.send_signal(signal.SIGTERM)
    assert push.wait(20) == 0
