"""Against a service with authentication on: a missing or wrong key fails in one line and is
never retried; a key with the right scopes registers agents and submits jobs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentreach import (
    Agent,
    AsyncClient,
    Client,
    JobContext,
    PermissionDenied,
    RegistrationError,
    Unauthenticated,
    Worker,
)
from conftest import Service, healthy, serving, unique

HERE = Path(__file__).parent


def make_key(svc: Service, *scopes: str) -> str:
    with svc.api() as api:
        r = api.post("/v1/keys", json={"namespace": "default", "name": unique("k"), "scopes": list(scopes)})
        r.raise_for_status()
        key: str = r.json()["key"]
        return key


def counting_client() -> tuple[httpx.Client, list[httpx.Request]]:
    sent: list[httpx.Request] = []
    return httpx.Client(event_hooks={"request": [sent.append]}, timeout=10), sent


def test_a_missing_key_says_so_in_one_line_and_is_not_retried(
    secure_service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTREACH_KEY", raising=False)
    http, sent = counting_client()
    with Client(secure_service.url, http=http) as c, pytest.raises(Unauthenticated) as e:
        c.submit("anything", {})
    assert len(sent) == 1
    line = str(e.value)
    assert "\n" not in line and "AGENTREACH_KEY" in line and e.value.status == 401


def test_a_wrong_key_says_it_was_refused_without_showing_it(secure_service: Service) -> None:
    wrong = "ark_" + "0" * 48
    http, sent = counting_client()
    with Client(secure_service.url, api_key=wrong, http=http) as c, pytest.raises(Unauthenticated) as e:
        c.get("01a00000-0000-7000-8000-000000000000")
    assert len(sent) == 1
    assert "refused" in str(e.value) and wrong not in str(e.value) and "\n" not in str(e.value)


def test_a_key_without_the_scope_is_permission_denied(secure_service: Service) -> None:
    key = make_key(secure_service, "jobs:read")
    with Client(secure_service.url, api_key=key) as c, pytest.raises(PermissionDenied) as e:
        c.submit("document:parse", {})
    assert e.value.code == "permission_denied" and e.value.field == "capability"


@pytest.mark.anyio
async def test_an_agent_with_a_wrong_key_stops_at_once(secure_service: Service) -> None:
    for make in (Agent, Worker):
        agent: Any = make(unique("locked-out"), server_url=secure_service.url, api_key="ark_" + "1" * 48,
                          start_jitter=0, capabilities=["x"])
        agent.add_handler(None, lambda job: None)
        with pytest.raises(RegistrationError) as e:
            await asyncio.wait_for(agent.serve(), 10)
        assert "refused" in str(e.value) and "\n" not in str(e.value)


def test_run_ends_the_program_with_one_line_for_a_wrong_key(secure_service: Service) -> None:
    env = {"AGENTREACH_URL": secure_service.url, "AGENTREACH_KEY": "ark_" + "2" * 48, "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, str(HERE / "agent_proc.py"), "pull", unique("nope"), "cap"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("agentreach: registering agent") and "refused" in last
    assert "Traceback" not in p.stderr and "2" * 48 not in p.stderr


@pytest.mark.anyio
async def test_a_key_with_the_right_scopes_registers_and_submits(secure_service: Service) -> None:
    agent_key = make_key(secure_service, "agents:write")
    caller_key = make_key(secure_service, "jobs:submit:scoped.*", "jobs:read")
    cap = unique("scoped.echo")
    agent = Agent(unique("scoped"), server_url=secure_service.url, api_key=agent_key, start_jitter=0, ttl_seconds=5)

    @agent.handler(cap)
    async def echo(job: JobContext) -> Any:
        return job.payload

    async with serving(agent), AsyncClient(secure_service.url, api_key=caller_key) as c:
        await healthy(secure_service, agent.agent_id)
        job = await c.run(cap, {"secure": True}, timeout=20)
    assert job.result == {"secure": True}
