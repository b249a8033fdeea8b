"""A pull worker: an agent without an endpoint that claims its work.

>>> worker = Worker("laptop-1", concurrency=2)
>>> @worker.handler("notes.summarize")
... def summarize(job: JobContext) -> dict:
...     return {"summary": job.payload["text"][:80]}
>>> worker.run()

It registers with ``"mode": "pull"``, long-polls ``claim`` for at most as
many attempts as it has free slots, runs each, and posts the result to its
``result_url``. A handler that raises gives its attempt back as failed
(retried after backoff); one that raises :class:`~agentreach.Refused` gives
it back unstarted. Jobs cancelled meanwhile come in the heartbeat's answer
and end their handlers' contexts. On shutdown it stops claiming, gives back
what it claimed but has not started, waits for the rest, and goes offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
from collections import deque
from typing import Any, AsyncIterator, Callable, Sequence

from ._base import AgentBase, JobContext, RegistrationError, _Outcome
from ._transport import Call
from .errors import AgentReachError, APIError, NotFound, NotPull, TransportError, Unauthenticated
from .models import Delivery, HeldAttempt

__all__ = ["Worker"]

log = logging.getLogger("agentreach")


class Worker(AgentBase):
    """A pull-mode agent with a concurrency limit.

    Args:
        agent_id: the agent's id in its namespace.
        concurrency: how many attempts run at once.
        prefetch: how many more it claims ahead, to start as soon as a slot frees
            (default 0). Registered ``max_concurrent`` is ``concurrency + prefetch``;
            a prefetched attempt's deadline runs from its claim, and a shutdown
            gives it back unstarted.
        claim_wait: how long one claim long-polls (seconds, at most 60).
        Every other argument is :class:`~agentreach.Agent`'s.
    """

    mode = "pull"

    def __init__(
        self, agent_id: str, *, concurrency: int = 1, prefetch: int = 0, claim_wait: float = 20.0, **options: Any
    ) -> None:
        if concurrency < 1 or prefetch < 0:
            raise ValueError("concurrency must be at least 1 and prefetch at least 0")
        options.setdefault("max_concurrent", concurrency + prefetch)
        super().__init__(agent_id, **options)
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.claim_wait = min(max(claim_wait, 0.0), 60.0)
        self._claim_task: asyncio.Task[None] | None = None
        self._claim_call: asyncio.Future[Any] | None = None
        self._slot_free: asyncio.Event | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._unstarted: deque[Delivery] = deque()
        self._stop_requested: asyncio.Event | None = None
        self.claims = 0

    def _registration(self) -> dict[str, Any]:
        body = super()._registration()
        body["mode"] = "pull"
        return body

    def _queue_length(self) -> int | None:
        return len(self._unstarted)

    # --- life -----------------------------------------------------------

    async def start(self) -> None:
        """Starts registering, heartbeating and claiming; answers at once."""
        self._stop_requested = asyncio.Event()
        self._slot_free = asyncio.Event()
        await self._open()
        self._claim_task = asyncio.create_task(self._claim_loop(), name=f"agentreach-claim-{self.agent_id}")

    async def stop(self) -> None:
        """Stops claiming and gives back unstarted work, waits for the rest up to ``shutdown_grace``, goes offline.

        While it waits, its heartbeat says ``accepting: false``, so nothing new
        is routed to it. Attempts still running past the grace are cancelled
        and given back as failed, so they are retried at once rather than at
        their deadline. (A pull agent gives work back before it goes offline:
        an offline agent's release is refused.)
        """
        if not self._started or self._stopping:
            return
        self._stopping = True
        if self._claim_task is not None:
            self._claim_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._claim_task
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
        if self._token:
            await self._not_accepting()
        if self._unstarted:
            await self._release(list(self._unstarted), None)
            self._unstarted.clear()
        await self._drain(self.shutdown_grace)
        if self._running:
            await asyncio.wait(list(self._running), timeout=10.0)
        await self._offline()
        await self._close()

    async def _not_accepting(self) -> None:
        assert self._t is not None
        report = self.health_report()
        report["context"] = dict(report.get("context") or {}, accepting=False)
        try:
            await self._t.call(Call("PUT", self._path("/heartbeat"), json=report, params=self._agent_params(),
                                    bearer=self._token, credential="agent token", retries=1, timeout=5.0))
        except AgentReachError as e:
            log.warning("agentreach: telling the registry %s stops accepting: %s", self.agent_id, e)

    def request_stop(self) -> None:
        """Asks :meth:`serve` or :meth:`run` to shut down gracefully (safe from any thread)."""
        if self._loop is not None and self._stop_requested is not None:
            self._loop.call_soon_threadsafe(self._stop_requested.set)

    def _on_fatal(self, err: BaseException) -> None:
        if self._stop_requested is not None:
            self._stop_requested.set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Worker]:
        """``async with worker.running():`` starts the worker and stops it gracefully at the end."""
        await self.start()
        try:
            yield self
        finally:
            await self.stop()

    async def serve(self, *, handle_signals: bool = False, ready: Callable[[Worker], None] | None = None) -> None:
        """Works until :meth:`request_stop`, a fatal registration error or (with ``handle_signals``)
        SIGINT/SIGTERM, then stops gracefully. Raises :class:`~agentreach.RegistrationError` if the
        registry refused the worker."""
        loop = asyncio.get_running_loop()
        signals: list[signal.Signals] = []
        try:
            await self.start()
            assert self._stop_requested is not None
            if handle_signals:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                        loop.add_signal_handler(sig, self._stop_requested.set)
                        signals.append(sig)
            if ready is not None:
                ready(self)
            await self._stop_requested.wait()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            await self.stop()
        if self._fatal is not None:
            raise self._fatal

    def run(self) -> None:
        """Works until SIGINT or SIGTERM (blocking), then stops gracefully.

        A registration the registry refuses for good ends the program with that one line.
        """
        try:
            asyncio.run(self.serve(handle_signals=True))
        except RegistrationError as e:
            raise SystemExit(f"agentreach: {e}") from None

    # --- claiming -------------------------------------------------------

    async def _claim_loop(self) -> None:
        assert self._slot_free is not None and self._registered is not None
        backoff = 0.2
        while not self._stopping:
            if not self._token:
                await self._registered.wait()
                if self._fatal is not None:
                    return
                if not self._token:
                    await asyncio.sleep(0.05)
                    continue
            room = self.concurrency + self.prefetch - len(self._running) - len(self._unstarted)
            if room <= 0:
                self._slot_free.clear()
                await self._slot_free.wait()
                continue
            try:
                got = await self._claim(room)
                backoff = 0.2
            except (NotFound, Unauthenticated):
                # The registry lost us (or replaced our token): the heartbeat
                # task registers again; wait for it.
                self._registered.clear()
                self._forget_token()
                if self._wake_heartbeat is not None:
                    self._wake_heartbeat.set()
                continue
            except NotPull as e:
                err = RegistrationError(f"agent {self.agent_id} is registered in push mode: {e}")
                log.error("agentreach: %s", err)
                self._fatal = err
                self._on_fatal(err)
                return
            except (APIError, TransportError) as e:
                log.warning("agentreach: claim of %s: %s (again in %.1f s)", self.agent_id, e, backoff)
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 10.0)
                continue
            self._unstarted.extend(got)
            self._pump()

    def _pump(self) -> None:
        """Starts claimed attempts while slots are free; drops one whose deadline passed unstarted."""
        while self._unstarted and len(self._running) < self.concurrency and not self._stopping:
            d = self._unstarted.popleft()
            ctx = JobContext(d)
            left = ctx.time_left()
            if left is not None and left <= 0:
                log.warning("agentreach: job %s attempt %d waited past its deadline unstarted", d.job_id, d.attempt)
                continue
            self._start(d)

    async def _claim(self, n: int) -> list[Delivery]:
        assert self._t is not None
        wait_ms = int(self.claim_wait * 1000)
        resp = await self._t.call(Call("POST", self._path("/claim"), json={"max": min(n, 100), "wait_ms": wait_ms},
                                       params=self._agent_params(), bearer=self._token,
                                       credential="agent token", retries=0, timeout=self.claim_wait + 10.0))
        self.claims += 1
        rows = resp.get("deliveries") if isinstance(resp, dict) else None
        out: list[Delivery] = []
        for r in rows if isinstance(rows, list) else []:
            try:
                out.append(Delivery.from_json(r))
            except (ValueError, AttributeError) as e:
                log.warning("agentreach: skipped a claimed delivery: %s", e)
        return out

    def _start(self, d: Delivery) -> None:
        ctx = JobContext(d)
        self._hold(ctx)
        task = asyncio.ensure_future(self._work(ctx))
        self._running.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._pump()
        if self._slot_free is not None:
            self._slot_free.set()

    async def _work(self, ctx: JobContext) -> None:
        try:
            route = self._route(ctx.capability)
            if route is None:
                await self._release([ctx.delivery], f"this worker serves no {ctx.capability!r}")
                return
            outcome = await self._run_handler(route, ctx, keep=True)
            self._count(outcome, ctx)
            await self._settle(ctx, outcome)
        finally:
            self._release_hold(ctx)

    async def _settle(self, ctx: JobContext, outcome: _Outcome) -> None:
        if outcome.kind == "result" and outcome.result is not None:
            await self._report_quietly(ctx, outcome.result)
        elif outcome.kind == "refused":
            await self._release([ctx.delivery], None)
        elif outcome.kind == "error":
            await self._release([ctx.delivery], f"handler failed: {type(outcome.error).__name__}: {outcome.error}")
        elif outcome.kind == "ended" and ctx.cancel_reason == "shutdown":
            await self._release([ctx.delivery], "the worker shut down before the job finished")
        elif outcome.kind == "deferred":
            log.warning("agentreach: a pull worker's handler answered DEFERRED for job %s: report it with "
                        "worker.report(); it is not counted in flight", ctx.job_id)

    async def _release(self, ds: Sequence[Delivery], error: str | None) -> None:
        """Gives attempts back: unstarted (no ``error``: routed again at once) or failed."""
        if self._t is None or not ds:
            return
        body: dict[str, Any] = {"jobs": [HeldAttempt(d.job_id, d.attempt).to_json() for d in ds]}
        if error:
            body["error"] = error[:4096]
        try:
            await self._t.call(Call("POST", self._path("/release"), json=body, params=self._agent_params(),
                                    bearer=self._token, credential="agent token", idempotent=True, retries=2))
            log.info("agentreach: %s gave back %d attempt(s)%s", self.agent_id, len(ds), " as failed" if error else "")
        except AgentReachError as e:
            log.warning("agentreach: giving back %d attempt(s): %s", len(ds), e)

    def _on_heartbeat(self, resp: Any) -> None:
        rows = resp.get("cancelled") if isinstance(resp, dict) else None
        for r in rows if isinstance(rows, list) else []:
            if isinstance(r, dict) and isinstance(r.get("job_id"), str):
                att = r.get("attempt")
                self.cancel_job(r["job_id"], att if isinstance(att, int) else None)
