"""Push agents against the real service: inline and accepted work, retries, cancel notices,
heartbeats under load, re-registration, signatures, offline, and the ASGI app mounted in Starlette."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from typing import Any, AsyncIterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from agentreach import DEFERRED, Agent, AsyncClient, JobContext, Refused, Result, failure
from conftest import Service, await_until, free_port, healthy, serving, unique

pytestmark = pytest.mark.anyio


def new_agent(service: Service, **kw: Any) -> Agent:
    kw.setdefault("ttl_seconds", 5)
    return Agent(unique("push"), server_url=service.url, start_jitter=0, shutdown_grace=5, **kw)


@contextlib.asynccontextmanager
async def client(service: Service) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(service.url) as c:
        yield c


async def test_an_inline_result_comes_back_to_the_caller(service: Service) -> None:
    agent = new_agent(service)
    cap = unique("echo")
    seen: list[JobContext] = []

    @agent.handler(cap)
    async def echo(job: JobContext) -> dict[str, Any]:
        seen.append(job)
        return {"echo": job.payload, "attempt": job.attempt}

    async with serving(agent), client(service) as c:
        await healthy(service, agent.agent_id)
        job = await c.run(cap, {"n": 7}, timeout=20)
    assert job.status == "SUCCESS" and job.result == {"echo": {"n": 7}, "attempt": 1}
    assert job.agent_id == agent.agent_id and job.attempts == 1
    ctx = seen[0]
    assert ctx.job_id == job.job_id and ctx.trace_id == job.trace_id and ctx.deadline is not None
    assert ctx.delivery.traceparent and job.trace_id in ctx.delivery.traceparent


async def test_a_business_failure_is_failed_with_its_code(service: Service) -> None:
    agent = new_agent(service)
    cap = unique("fails")

    @agent.handler(cap)
    def fails(job: JobContext) -> Result:
        return failure("out_of_paper", {"tray": 2})

    async with serving(agent), client(service) as c:
        await healthy(service, agent.agent_id)
        job = await c.run(cap, {}, timeout=20)
    assert (job.status, job.biz_code, job.result, job.attempts) == ("FAILED", "out_of_paper", {"tray": 2}, 1)


async def test_a_handler_error_or_a_refusal_is_a_delivery_that_did_not_happen_and_is_retried(service: Service) -> None:
    agent = new_agent(service)
    cap_err, cap_refuse = unique("flaky"), unique("picky")

    @agent.handler(cap_err)
    def flaky(job: JobContext) -> str:
        if job.attempt == 1:
            raise RuntimeError("boom")
        return "ok"

    @agent.handler(cap_refuse)
    async def picky(job: JobContext) -> str:
        if job.attempt == 1:
            raise Refused()
        return "ok"

    async with serving(agent), client(service) as c:
        await healthy(service, agent.agent_id)
        a = await c.submit(cap_err, {}, backoff_base_ms=100, backoff_max_ms=200)
        b = await c.submit(cap_refuse, {}, backoff_base_ms=100, backoff_max_ms=200)
        ja, jb = await c.wait(a.job_id, timeout=20), await c.wait(b.job_id, timeout=20)
        for j in (ja, jb):
            assert (j.status, j.result, j.attempts) == ("SUCCESS", "ok", 2)
        reasons = [e.data.get("reason") for e in await c.events(a.job_id) if e.type == "ATTEMPT_FAILED"]
        assert reasons == ["http_500"]
        reasons = [e.data.get("reason") for e in await c.events(b.job_id) if e.type == "ATTEMPT_FAILED"]
        assert reasons == ["http_503"]


async def delivered_now(c: AsyncClient, job_id: str) -> bool:
    return (await c.get(job_id)).status == "DELIVERED"


async def test_accepted_work_answers_202_and_reports_later_in_the_jobs_trace(service: Service) -> None:
    agent = new_agent(service)
    cap = unique("slow")
    go = asyncio.Event()

    @agent.handler(cap, accept=True)
    async def slow(job: JobContext) -> dict[str, str]:
        await go.wait()
        return {"done": job.job_id}

    async with serving(agent), client(service) as c:
        await healthy(service, agent.agent_id)
        sub = await c.submit(cap, {})
        # Delivered with 202 and still running: the job waits for the report.
        await await_until(lambda: agent.in_flight == 1, what="the job to be accepted")
        # DELIVERED is written once the 202 is back at the dispatcher.
        await await_until(lambda: delivered_now(c, sub.job_id), what="DELIVERED")
        delivered = [e for e in await c.events(sub.job_id) if e.type == "DELIVERED"]
        assert delivered[0].data.get("async") is True
        go.set()
        job = await c.wait(sub.job_id, timeout=20)
        assert job.status == "SUCCESS" and job.result == {"done": sub.job_id}
        success = [e for e in await c.events(sub.job_id) if e.type == "SUCCESS"][0]
        # The report carried the delivery's traceparent: the outcome is in the job's trace.
        assert success.raw["metadata"]["trace_id"] == job.trace_id
    assert agent.in_flight == 0


async def test_deferred_work_is_reported_by_the_application(service: Service) -> None:
    agent = new_agent(service)
    cap = unique("deferred")
    parked: list[JobContext] = []

    @agent.handler(cap)
    def park(job: JobContext) -> Any:
        parked.append(job)
        return DEFERRED

    async with serving(agent), client(service) as c:
        await healthy(service, agent.agent_id)
        sub = await c.submit(cap, {"x": 1})
        await await_until(lambda: parked, what="the job to be parked")
        assert agent.in_flight == 1
        assert await agent.report(parked[0].delivery, {"later": True}) == "outcome"
        assert await agent.report(parked[0].delivery, {"again": True}) == "duplicate"
        job = await c.wait(sub.job_id, timeout=20)
    assert job.result == {"later": True} and agent.in_flight == 0


async def test_a_cancel_notice_reaches_async_and_sync_handlers(service: Service) -> None:
    agent = new_agent(service)
    cap_async, cap_sync = unique("cancel-async"), unique("cancel-sync")
    started: list[str] = []
    ended: dict[str, str] = {}

    @agent.handler(cap_async, accept=True)
    async def waits(job: JobContext) -> str:
        started.append(job.job_id)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            ended[job.job_id] = job.cancel_reason or "?"
            raise
        return "not cancelled"

    @agent.handler(cap_sync)
    def polls(job: JobContext) -> str:
        started.append(job.job_id)
        job.cancel_event.wait(60)
        ended[job.job_id] = job.cancel_reason or "?"
        return "not cancelled"

    async with serving(agent), client(service) as c:
        await healthy(service, agent.agent_id)
        a = await c.submit(cap_async, {}, timeout_ms=60000)
        b = await c.submit(cap_sync, {}, timeout_ms=60000)
        await await_until(lambda: len(started) == 2, what="both jobs to start")
        for sub in (a, b):
            assert (await c.cancel(sub.job_id, reason="changed my mind")).status == "CANCELLED"
        await await_until(lambda: len(ended) == 2, what="both handlers to see the cancel")
        assert ended == {a.job_id: "cancelled", b.job_id: "cancelled"}
        await await_until(lambda: agent.in_flight == 0, what="the jobs to end")
        assert (await c.get(a.job_id)).status == "CANCELLED"


async def test_heartbeats_go_on_while_work_blocks_and_carry_the_health_figures(service: Service) -> None:
    agent = new_agent(service, max_concurrent=2)
    cap = unique("busy")
    release = threading.Event()

    @agent.handler(cap)
    def busy(job: JobContext) -> str:
        release.wait(30)  # a blocking handler: it runs in a thread, the loop stays free
        return "done"

    async with serving(agent), client(service) as c:
        await healthy(service, agent.agent_id)
        sub = await c.submit(cap, {}, timeout_ms=60000)
        await await_until(lambda: agent.in_flight == 1, what="the job to start")
        before = agent.heartbeats
        # Two more heartbeats (ttl 5 s: every ~1.7 s) while the handler holds its thread.
        await await_until(lambda: agent.heartbeats >= before + 2, timeout=10, what="heartbeats during work")
        # Heartbeats are written in batches: the figures show within a moment.
        def reported() -> bool:
            info = service.agent(agent.agent_id)
            return bool(info["state"] == "HEALTHY" and info["in_flight"] == 1
                        and info["health_report"]["pool_usage"] == 0.5)

        await await_until(reported, what="the health figures of the heartbeat")
        release.set()
        assert (await c.wait(sub.job_id, timeout=20)).status == "SUCCESS"


async def test_the_agent_registers_again_when_the_registry_forgot_it(service: Service) -> None:
    agent = new_agent(service)
    cap = unique("phoenix")

    @agent.handler(cap)
    async def h(job: JobContext) -> str:
        return "back"

    async with serving(agent), client(service) as c:
        await healthy(service, agent.agent_id)
        first = agent.signing_tokens()[0]
        with service.api() as api:
            assert api.delete(f"/v1/agents/{agent.agent_id}").status_code == 204
        # The next heartbeat answers 404: the agent registers again, with a new token.
        await await_until(lambda: agent.registered and agent.signing_tokens()[0] != first, timeout=10,
                          what="a new registration")
        await healthy(service, agent.agent_id)
        assert (await c.run(cap, {}, timeout=20)).result == "back"


async def test_deliveries_without_the_agents_signature_are_refused(service: Service) -> None:
    agent = new_agent(service)
    cap = unique("guarded")
    ran: list[str] = []

    @agent.handler(cap)
    async def h(job: JobContext) -> str:
        ran.append(job.job_id)
        return "ran"

    async with serving(agent):
        assert agent.endpoint
        body = json.dumps({"job_id": "forged", "attempt": 1, "capability": cap, "payload": {}}).encode()
        ts = str(int(time.time()))
        async with httpx.AsyncClient(timeout=5) as h2:
            probe = await h2.get(agent.endpoint)
            assert probe.status_code == 200
            r = await h2.post(agent.endpoint, content=body, headers={
                "webhook-id": "forged.1", "webhook-timestamp": ts, "webhook-signature": "v1,AAAA"})
            assert r.status_code == 401
            r = await h2.post(agent.endpoint, content=body)
            assert r.status_code == 401
    assert ran == []


async def test_the_agent_goes_offline_when_it_stops(service: Service) -> None:
    agent = new_agent(service)

    @agent.handler(unique("bye"))
    async def h(job: JobContext) -> str:
        return "x"

    async with serving(agent):
        await healthy(service, agent.agent_id)
    assert service.agent(agent.agent_id)["state"] == "OFFLINE"


async def test_the_asgi_app_mounted_in_starlette_serves_jobs(service: Service) -> None:
    port = free_port()
    agent = new_agent(service, endpoint=f"http://127.0.0.1:{port}/agent/")
    cap = unique("mounted")

    @agent.handler(cap)
    async def h(job: JobContext) -> dict[str, Any]:
        return {"via": "starlette", "payload": job.payload}

    app = Starlette(routes=[Mount("/agent", app=agent.asgi)], lifespan=agent.lifespan)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        await await_until(lambda: agent.registered, what="the mounted agent to register")
        await healthy(service, agent.agent_id)
        async with client(service) as c:
            job = await c.run(cap, [1, 2], timeout=20)
        assert job.result == {"via": "starlette", "payload": [1, 2]}
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
    assert service.agent(agent.agent_id)["state"] == "OFFLINE"


async def test_registration_waits_for_the_start_up_jitter_and_heartbeats_at_the_registrys_interval(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[tuple[float, float]] = []

    def uniform(a: float, b: float) -> float:
        drawn.append((a, b))
        return 0.4  # the draw, made known

    monkeypatch.setattr(random, "uniform", uniform)
    agent = Agent(unique("jitter"), server_url=service.url, start_jitter=3.0, ttl_seconds=6)

    @agent.handler(unique("j"))
    async def h(job: JobContext) -> str:
        return "x"

    t0 = time.monotonic()
    async with serving(agent):
        waited = time.monotonic() - t0
        assert drawn == [(0, 3.0)] and 0.4 <= waited < 3.0
        # ttl 6 s: the registry asks for a heartbeat every 2 s.
        assert agent._interval == pytest.approx(2.0)
