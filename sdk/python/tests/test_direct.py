"""Lookup mode against the real service: push agents taking direct calls on an invocation grant,
and the caller's lookup (cached, watched) and invoke (failing over, reporting)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any, AsyncIterator

import httpx
import pytest

from agentreach import DEFERRED, Agent, JobContext
from conftest import Service, healthy, serving, sign_grant, unique

pytestmark = pytest.mark.anyio


def new_agent(service: Service, agent_id: str | None = None, **kw: Any) -> Agent:
    kw.setdefault("ttl_seconds", 5)
    return Agent(agent_id or unique("direct"), server_url=service.url, start_jitter=0, shutdown_grace=5, **kw)


def envelope(capability: str, payload: Any = None) -> bytes:
    return json.dumps({"job_id": str(uuid.uuid4()), "attempt": 1, "trace_id": uuid.uuid4().hex,
                       "capability": capability, "payload": payload, "result_url": ""}).encode()


@contextlib.asynccontextmanager
async def both_serving(*agents: Agent) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        for a in agents:
            await stack.enter_async_context(serving(a))
        yield


async def test_a_push_agent_takes_a_direct_call_on_its_own_grant_and_refuses_others(service: Service) -> None:
    ns = unique("ns")
    cap, later, parked = unique("cap"), unique("later"), unique("parked")
    a, b = new_agent(service, namespace=ns), new_agent(service, namespace=ns)
    seen: list[JobContext] = []

    for agent in (a, b):
        @agent.handler(cap)
        async def work(job: JobContext) -> dict[str, Any]:
            seen.append(job)
            return {"by": job.delivery.raw.get("capability"), "direct": job.direct}

        @agent.handler(later, accept=True)
        async def accepted(job: JobContext) -> str:
            seen.append(job)
            return "never"

        @agent.handler(parked)
        def park(job: JobContext) -> Any:
            return DEFERRED

    async with both_serving(a, b):
        for agent in (a, b):
            await healthy(service, agent.agent_id)
        with service.api() as api:
            r = api.post("/v1/lookup", json={"capability": cap, "namespace": ns, "limit": 5})
            assert r.status_code == 200, r.text
            grants = {c["agent_id"]: c["grant"] for c in r.json()["candidates"]}
        assert set(grants) == {a.agent_id, b.agent_id}
        assert a.endpoint is not None
        async with httpx.AsyncClient(timeout=10) as http:
            async def post(grant: str | None, capability: str = cap) -> httpx.Response:
                headers = {"Content-Type": "application/json"}
                if grant is not None:
                    headers["X-Reach-Grant"] = grant
                assert a.endpoint is not None
                return await http.post(a.endpoint, content=envelope(capability, {"n": 1}), headers=headers)

            # Its own grant, from the registry: taken, marked direct, answered inline.
            ok = await post(grants[a.agent_id])
            assert ok.status_code == 200, ok.text
            assert ok.json() == {"status": "SUCCESS", "result": {"by": cap, "direct": True}}
            assert len(seen) == 1 and seen[0].direct and seen[0].delivery.result_url == ""

            # Another agent's grant, an expired one, a forged one, none at all: refused, never run.
            refused = {
                "another agent's": await post(grants[b.agent_id]),
                "expired": await post(sign_grant(a.signing_tokens(), ns=ns, agent=a.agent_id, cap=cap,
                                                 iat=int(time.time()) - 301, exp=int(time.time()) - 1)),
                "another capability's": await post(sign_grant(a.signing_tokens(), ns=ns, agent=a.agent_id,
                                                              cap=later)),
                "naming another agent": await post(sign_grant(a.signing_tokens(), ns=ns, agent=b.agent_id, cap=cap)),
                "garbage": await post("v1.e30.AAAA"),
                "no grant and no signature": await post(None),
            }
            for why, resp in refused.items():
                assert resp.status_code == 401, (why, resp.text)
            assert "expired" in refused["expired"].json()["error"]
            assert "not signed for this agent" in refused["another agent's"].json()["error"]
            assert f"for agent {b.agent_id}" in refused["naming another agent"].json()["error"]
            assert len(seen) == 1

            # Accepted work cannot be answered later on a direct call: 501, and the handler never runs.
            late = await post(sign_grant(a.signing_tokens(), ns=ns, agent=a.agent_id, cap=later), later)
            assert late.status_code == 501, late.text
            assert len(seen) == 1
            deferred = await post(sign_grant(a.signing_tokens(), ns=ns, agent=a.agent_id, cap=parked), parked)
            assert deferred.status_code == 501, deferred.text
        assert a.in_flight == 0
        assert a.in_flight == 0
