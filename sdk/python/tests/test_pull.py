"""Pull workers against the real service: claim, run and report within a concurrency limit,
give work back, learn of cancels from heartbeats, and give back unstarted work on shutdown."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agentreach import AsyncClient, JobContext, Refused, Worker
from conftest import Service, await_until, healthy, unique, working

pytestmark = pytest.mark.anyio


def new_worker(service: Service, **kw: Any) -> Worker:
    kw.setdefault("ttl_seconds", 5)
    kw.setdefault("claim_wait", 2.0)
    kw.setdefault("shutdown_grace", 5)
    return Worker(kw.pop("agent_id", None) or unique("pull"), server_url=service.url, start_jitter=0, **kw)


async def test_a_worker_claims_runs_and_reports_within_its_concurrency(service: Service) -> None:
    worker = new_worker(service, concurrency=2)
    cap = unique("summarize")
    gates: dict[str, threading.Event] = {}
    running: set[str] = set()
    peak = 0
    lock = threading.Lock()

    @worker.handler(cap)
    def summarize(job: JobContext) -> dict[str, Any]:
        nonlocal peak
        with lock:
            running.add(job.job_id)
            peak = max(peak, len(running))
            gate = gates.setdefault(job.job_id, threading.Event())
        gate.wait(30)
        with lock:
            running.discard(job.job_id)
        return {"summary": str(job.payload["text"])[:5]}

    async with working(worker), AsyncClient(service.url) as c:
        subs = [await c.submit(cap, {"text": f"text number {i}"}) for i in range(3)]
        await await_until(lambda: len(running) == 2, what="two jobs running")
        waiting = [s for s in subs if s.job_id not in running]
        assert len(waiting) == 1 and worker.in_flight == 2
        # The third is not delivered: the registry holds the worker to max_concurrent 2.
        assert (await c.get(waiting[0].job_id)).status != "DELIVERED"
        assert service.agent(worker.agent_id)["state"] == "HEALTHY"
        with lock:
            for s in subs:
                gates.setdefault(s.job_id, threading.Event()).set()
        jobs = [await c.wait(s.job_id, timeout=20) for s in subs]
        assert [j.status for j in jobs] == ["SUCCESS"] * 3
        assert jobs[0].result == {"summary": "text "} and peak == 2
        delivered = [e for e in await c.events(jobs[2].job_id) if e.type == "DELIVERED"][0]
        assert delivered.data.get("claimed") is True
        success = [e for e in await c.events(jobs[2].job_id) if e.type == "SUCCESS"][0]
        assert success.raw["metadata"]["trace_id"] == jobs[2].trace_id


async def test_an_error_gives_the_attempt_back_failed_and_a_refusal_unstarted(service: Service) -> None:
    worker = new_worker(service, concurrency=2)
    cap_err, cap_refuse = unique("flaky"), unique("picky")
    refused: list[int] = []

    @worker.handler(cap_err)
    async def flaky(job: JobContext) -> str:
        if job.attempt == 1:
            raise ValueError("no luck")
        return "second time lucky"

    @worker.handler(cap_refuse)
    def picky(job: JobContext) -> str:
        if not refused:
            refused.append(job.attempt)
            raise Refused()
        return "fine now"

    async with working(worker), AsyncClient(service.url) as c:
        a = await c.submit(cap_err, {}, backoff_base_ms=100, backoff_max_ms=200)
        b = await c.submit(cap_refuse, {}, backoff_base_ms=100, backoff_max_ms=200)
        ja, jb = await c.wait(a.job_id, timeout=20), await c.wait(b.job_id, timeout=20)
        assert (ja.status, ja.result, ja.attempts) == ("SUCCESS", "second time lucky", 2)
        failed = [e.data for e in await c.events(a.job_id) if e.type == "ATTEMPT_FAILED"]
        assert len(failed) == 1 and "no luck" in str(failed[0])
        assert failed[0].get("reason") != "released"
        # Given back unstarted: routed again at once as "released" (which spends none of max_attempts).
        assert (jb.status, jb.result, jb.attempts) == ("SUCCESS", "fine now", 2)
        failed = [e.data for e in await c.events(b.job_id) if e.type == "ATTEMPT_FAILED"]
        assert [f.get("reason") for f in failed] == ["released"]


async def test_a_cancelled_job_ends_its_handlers_context_from_the_heartbeat(service: Service) -> None:
    worker = new_worker(service)
    cap = unique("long")
    started = asyncio.Event()
    reasons: list[str | None] = []

    @worker.handler(cap)
    async def long(job: JobContext) -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            reasons.append(job.cancel_reason)
            raise
        return "not cancelled"

    async with working(worker), AsyncClient(service.url) as c:
        sub = await c.submit(cap, {}, timeout_ms=60000)
        await asyncio.wait_for(started.wait(), 15)
        await c.cancel(sub.job_id)
        await await_until(lambda: reasons, timeout=10, what="the handler to see the cancel")
        assert reasons == ["cancelled"]
        await await_until(lambda: worker.in_flight == 0, what="the job to end")
        assert (await c.get(sub.job_id)).status == "CANCELLED"


async def test_shutdown_gives_back_unstarted_work_and_fails_what_outlives_the_grace(service: Service) -> None:
    cap = unique("handover")
    first = new_worker(service, concurrency=1, prefetch=1, shutdown_grace=0.5)
    started: list[str] = []
    ends: list[str | None] = []

    @first.handler(cap)
    def stubborn(job: JobContext) -> str:
        started.append(job.job_id)
        job.cancel_event.wait(30)
        ends.append(job.cancel_reason)
        return "never reported"

    second = new_worker(service, concurrency=2)

    @second.handler(cap)
    async def quick(job: JobContext) -> str:
        return "done by the second"

    async with AsyncClient(service.url) as c:
        async with working(first):
            a = await c.submit(cap, {}, backoff_base_ms=100, backoff_max_ms=200)
            await await_until(lambda: started, what="the first job to start")
            b = await c.submit(cap, {})
            # The second job is claimed ahead (prefetch) and waits unstarted.
            await await_until(lambda: first.health_report().get("queue_length") == 1, what="a prefetched job")
            assert started == [a.job_id]
        # Stopped: b given back unstarted; a cancelled after the grace and given back as failed.
        assert ends == ["shutdown"]
        assert service.agent(first.agent_id)["state"] == "OFFLINE"
        async with working(second):
            ja, jb = await c.wait(a.job_id, timeout=20), await c.wait(b.job_id, timeout=20)
        assert (ja.status, ja.agent_id, ja.attempts) == ("SUCCESS", second.agent_id, 2)
        assert (jb.status, jb.agent_id, jb.attempts) == ("SUCCESS", second.agent_id, 2)
        b_failed = [e.data.get("reason") for e in await c.events(b.job_id) if e.type == "ATTEMPT_FAILED"]
        assert b_failed == ["released"]
        a_failed = [e.data for e in await c.events(a.job_id) if e.type == "ATTEMPT_FAILED"]
        assert len(a_failed) == 1 and "shut down" in str(a_failed[0]) and a_failed[0].get("reason") != "released"


async def test_a_forgotten_worker_registers_again_and_claims_on(service: Service) -> None:
    worker = new_worker(service)
    cap = unique("again")

    @worker.handler(cap)
    async def h(job: JobContext) -> str:
        return "still here"

    async with working(worker), AsyncClient(service.url) as c:
        token = worker.signing_tokens()[0]
        with service.api() as api:
            assert api.delete(f"/v1/agents/{worker.agent_id}").status_code == 204
        await await_until(lambda: worker.registered and worker.signing_tokens()[0] != token, timeout=10,
                          what="a new registration")
        await healthy(service, worker.agent_id)
        assert (await c.run(cap, {}, timeout=20)).result == "still here"


async def test_a_long_handler_is_kept_past_its_timeout(service: Service) -> None:
    # The handler runs until two progress reports extended its 1.5 s
    # deadline: the SDK reports them by itself; the job succeeds on its one
    # attempt, and the caller reads PROGRESS.
    worker = new_worker(service)
    cap = unique("slow")
    release = asyncio.Event()

    @worker.handler(cap)
    async def slow(job: JobContext) -> dict[str, Any]:
        await release.wait()
        return {"done": True}

    async with working(worker), AsyncClient(service.url) as c:
        sub = await c.submit(cap, {}, timeout_ms=1500, max_attempts=1)

        async def progressed() -> int:
            return len([e for e in await c.events(sub.job_id) if e.type == "PROGRESS"])

        deadline = asyncio.get_running_loop().time() + 20
        while await progressed() < 2:
            assert asyncio.get_running_loop().time() < deadline, "no two progress reports"
            await asyncio.sleep(0.1)
        release.set()
        job = await c.wait(sub.job_id, timeout=20)
        assert job.status == "SUCCESS" and job.attempts == 1
