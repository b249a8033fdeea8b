"""Python agents in their own processes: killed mid-job and restarted, the job still finishes;
SIGTERM takes them offline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from agentreach import Client
from conftest import Service, unique, wait_until

HERE = Path(__file__).parent


class Proc:
    """An agent process whose stdout lines are collected as they come."""

    def __init__(self, service: Service, *args: str, key: str | None = None) -> None:
        env = dict(os.environ, AGENTREACH_URL=service.url, PYTHONUNBUFFERED="1")
        env.pop("AGENTREACH_KEY", None)
        if key is not None:
            env["AGENTREACH_KEY"] = key
        self.p = subprocess.Popen([sys.executable, str(HERE / "agent_proc.py"), *args], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line.strip())

    def saw(self, line: str, timeout: float = 20.0) -> None:
        wait_until(lambda: line in self.lines, timeout, f"{line!r} from the agent process")

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop()


def state(service: Service, agent_id: str) -> str:
    with service.api() as api:
        r = api.get(f"/v1/agents/{agent_id}")
        return str(r.json().get("state")) if r.status_code == 200 else ""


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_an_agent_killed_mid_job_and_restarted_finishes_the_job(
    service: Service, procs: list[Proc], mode: str
) -> None:
    agent_id, cap = unique(f"phoenix-{mode}"), unique("survive")
    first = Proc(service, mode, agent_id, cap, "--hang-first")
    procs.append(first)
    wait_until(lambda: state(service, agent_id) == "HEALTHY", 20, f"{agent_id} HEALTHY")
    with Client(service.url) as c:
        # Push: the killed connection fails the attempt; pull: the claimed attempt times out.
        sub = c.submit(cap, {"n": 1}, timeout_ms=2000, max_attempts=10, backoff_base_ms=300, backoff_max_ms=600)
        first.saw(f"STARTED {sub.job_id} 1")
        first.p.send_signal(signal.SIGKILL)
        first.p.wait(10)
        second = Proc(service, mode, agent_id, cap)
        procs.append(second)
        job = c.wait(sub.job_id, timeout=40)
        assert job.status == "SUCCESS", job
        assert isinstance(job.result, dict) and job.result["pid"] == second.p.pid and job.attempts >= 2
        types = [e.type for e in c.events(sub.job_id)]
        assert ("ATTEMPT_FAILED" in types) if mode == "push" else ("TIMEOUT" in types)
    # SIGTERM: a graceful stop that takes the agent offline.
    second.p.send_signal(signal.SIGTERM)
    assert second.p.wait(20) == 0
    assert state(service, agent_id) == "OFFLINE"
