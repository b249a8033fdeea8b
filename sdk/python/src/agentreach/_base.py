"""What push agents and pull workers share: handlers, registration, heartbeats, running a job, reporting.

Everything runs on one asyncio loop. Heartbeats have their own task, so
work never delays them: an ``async def`` handler runs as a task of its own
and a plain ``def`` handler in a thread of the agent's pool (write blocking
work as a plain ``def``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Literal, Mapping, Sequence, TypeVar, Union
from urllib.parse import quote

from ._transport import AsyncTransport, Call, env_key, env_url
from .errors import (
    AgentReachError,
    APIError,
    Conflict,
    NotFound,
    TransportError,
    Unauthenticated,
)
from .models import Delivery, Result, parse_time, success

__all__ = [
    "JobContext",
    "Handler",
    "Refused",
    "JobCancelled",
    "DEFERRED",
    "HealthReport",
    "RegistrationError",
]

log = logging.getLogger("agentreach")

CancelReason = Literal["cancelled", "deadline", "shutdown", "disconnected"]


class Refused(AgentReachError):
    """Raised by a handler to decline an attempt it has not started.

    A push agent answers ``503`` and a pull worker gives the attempt back:
    Agent-Reach routes it again, possibly to another agent.
    """


class JobCancelled(AgentReachError):
    """Raised by :meth:`JobContext.raise_if_cancelled` once the job's context has ended."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the job's context ended: {reason}")


class RegistrationError(AgentReachError):
    """The registry refused the agent for good (a bad key, a missing scope, a bad registration)."""


class _Deferred:
    def __repr__(self) -> str:
        return "DEFERRED"


#: Returned by a push handler: answer ``202`` and let the application call
#: :meth:`Agent.report` itself later, before the job's deadline.
DEFERRED: Any = _Deferred()


@dataclass
class HealthReport:
    """The health figures a heartbeat carries; ``None`` leaves a figure to the SDK.

    By default the SDK sends ``in_flight`` (jobs running), ``pool_usage`` (in
    flight over ``max_concurrent``, when that is set), ``error_rate`` (the
    share of handler errors and deadline misses among the last 100 outcomes)
    and, for a pull worker, ``queue_length`` (claimed, not yet started).
    """

    in_flight: int | None = None
    queue_length: int | None = None
    error_rate: float | None = None
    pool_usage: float | None = None
    context: Mapping[str, Any] | None = None


class JobContext:
    """What a handler gets for one attempt: the delivery and a way to learn it should stop.

    An ``async def`` handler is also cancelled (``asyncio.CancelledError``)
    when the job is cancelled, its deadline passes or the agent shuts down;
    a plain ``def`` handler should look at :attr:`cancelled` (or wait on
    :attr:`cancel_event`) in its loop.
    """

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.cancel_event = threading.Event()
        self.cancel_reason: CancelReason | None = None
        self._async_event = asyncio.Event()
        self._task: asyncio.Future[Any] | None = None
        self._is_async = False
        self._deferred = False

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self.delivery.job_id

    @property
    def attempt(self) -> int:
        """The attempt number (from 1)."""
        return self.delivery.attempt

    @property
    def capability(self) -> str:
        """The capability the job was submitted for."""
        return self.delivery.capability

    @property
    def payload(self) -> Any:
        """The job's payload, as the caller sent it."""
        return self.delivery.payload

    @property
    def deadline(self) -> datetime | None:
        """When the attempt times out."""
        return self.delivery.deadline

    @property
    def trace_id(self) -> str:
        """The job's trace id."""
        return self.delivery.trace_id

    @property
    def direct(self) -> bool:
        """Whether a caller called the agent itself (lookup mode, with a verified grant)."""
        return self.delivery.direct

    @property
    def cancelled(self) -> bool:
        """Whether the job was cancelled, its deadline passed, or the agent is stopping."""
        return self.cancel_event.is_set()

    def time_left(self) -> float | None:
        """Seconds until the deadline (negative past it), or ``None`` without one."""
        if self.delivery.deadline is None:
            return None
        return (self.delivery.deadline - datetime.now(timezone.utc)).total_seconds()

    def raise_if_cancelled(self) -> None:
        """Raises :class:`JobCancelled` if the job's context has ended."""
        if self.cancel_event.is_set():
            raise JobCancelled(self.cancel_reason or "cancelled")

    async def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Waits until the job's context ends; answers whether it did within ``timeout``."""
        try:
            await asyncio.wait_for(self._async_event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def _cancel(self, reason: CancelReason) -> bool:
        if self.cancel_event.is_set():
            return False
        self.cancel_reason = reason
        self.cancel_event.set()
        self._async_event.set()
        if self._is_async and self._task is not None and not self._task.done():
            self._task.cancel()
        return True


T = TypeVar("T")
#: A handler: takes the job's context, answers a :class:`~agentreach.Result` or
#: any JSON value (a SUCCESS with that result), directly or awaited.
Handler = Callable[[JobContext], Union[Any, Awaitable[Any]]]


@dataclass
class _Route:
    handler: Handler
    accept: bool


class _Outcome:
    """How a handler ended: a result, a refusal, an error, or its context ending first."""

    def __init__(
        self,
        kind: Literal["result", "deferred", "refused", "error", "ended"],
        result: Result | None = None,
        error: BaseException | None = None,
    ) -> None:
        self.kind = kind
        self.result = result
        self.error = error


def _as_result(value: Any) -> Result:
    return value if isinstance(value, Result) else success(value)


class AgentBase:
    """Handlers, registration, heartbeats and reporting; see :class:`~agentreach.Agent` and
    :class:`~agentreach.Worker`."""

    mode: Literal["push", "pull"] = "push"

    def __init__(
        self,
        agent_id: str,
        *,
        server_url: str | None = None,
        api_key: str | None = None,
        capabilities: Sequence[str] = (),
        namespace: str | None = None,
        aliases: Sequence[str] = (),
        version: str | None = None,
        weight: int | None = None,
        max_concurrent: int | None = None,
        rollout_percent: int | None = None,
        ttl_seconds: int | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        capability_info: Mapping[str, Mapping[str, Any]] | None = None,
        start_jitter: float = 10.0,
        shutdown_grace: float = 30.0,
        health: Callable[[], HealthReport] | None = None,
        timeout: float = 10.0,
    ) -> None:
        if not agent_id:
            raise ValueError("agent_id is required")
        self.agent_id = agent_id
        self.server_url = env_url(server_url)
        self._key = env_key(api_key)
        self.namespace = namespace
        self._capabilities = list(capabilities)
        self.aliases = list(aliases)
        self.version = version
        self.weight = weight
        self.max_concurrent = max_concurrent
        self.rollout_percent = rollout_percent
        self.ttl_seconds = ttl_seconds
        self.context = dict(context) if context else None
        self.metadata = dict(metadata) if metadata else {}
        # What some capabilities do, published at registration for intent
        # resolution: {"parcel.track": {"title": ..., "description": ...,
        # "examples": [...], "tags": [...]}}.
        self.capability_info = {k: dict(v) for k, v in capability_info.items()} if capability_info else None
        self.start_jitter = max(0.0, start_jitter)
        self.shutdown_grace = shutdown_grace
        self._health = health
        self._timeout = timeout
        self._routes: dict[str, _Route] = {}
        self._default: _Route | None = None

        self._token = ""
        self._previous_token = ""
        self._interval = 10.0
        self._t: AsyncTransport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._jobs: dict[tuple[str, int], JobContext] = {}
        self._outcomes: deque[bool] = deque(maxlen=100)
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._registered: asyncio.Event | None = None
        self._fatal: BaseException | None = None
        self._stopping = False
        self._started = False
        self._idle: asyncio.Event | None = None
        self._wake_heartbeat: asyncio.Event | None = None
        self.heartbeats = 0

    def __repr__(self) -> str:  # never the key or the token
        return f"{type(self).__name__}({self.agent_id!r}, server_url={self.server_url!r})"

    # --- handlers -------------------------------------------------------

    def handler(
        self, capability: str | None = None, *, accept: bool = False
    ) -> Callable[[Callable[[JobContext], T]], Callable[[JobContext], T]]:
        """Decorates the function that serves ``capability`` (without one: every capability).

        With ``accept=True`` a push agent answers ``202`` at once and reports
        the result to the job's ``result_url`` when the handler returns, so
        long work holds no connection open. A pull worker always reports.
        """

        def deco(fn: Callable[[JobContext], T]) -> Callable[[JobContext], T]:
            self.add_handler(capability, fn, accept=accept)
            return fn

        return deco

    def add_handler(self, capability: str | None, fn: Handler, *, accept: bool = False) -> None:
        """Registers ``fn`` for ``capability`` (``None``: the fallback for every capability)."""
        if self._started:
            raise RuntimeError("handlers are added before the agent starts")
        route = _Route(fn, accept)
        if capability is None:
            self._default = route
        else:
            self._routes[capability] = route

    @property
    def capabilities(self) -> list[str]:
        """What the agent registers: its handlers' capabilities and those given."""
        out = list(self._capabilities)
        out += [c for c in self._routes if c not in out]
        return out

    def _route(self, capability: str) -> _Route | None:
        return self._routes.get(capability) or self._default

    # --- state ----------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """How many attempts the agent holds now."""
        return len(self._jobs)

    @property
    def registered(self) -> bool:
        """Whether the agent holds a token from the registry now."""
        return bool(self._token)

    async def wait_registered(self, timeout: float | None = None) -> None:
        """Waits for the first registration; raises its error if the registry refused the agent."""
        if self._registered is None:
            raise RuntimeError("the agent is not started")
        waiter = asyncio.ensure_future(self._registered.wait())
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        finally:
            waiter.cancel()
        if self._fatal is not None:
            raise self._fatal

    def set_context(self, context: Mapping[str, Any]) -> None:
        """Sends ``context`` with the next heartbeat (routing reads e.g. ``accepting: false``)."""
        self.context = dict(context)
        if self._wake_heartbeat is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake_heartbeat.set)

    def _forget_token(self) -> None:
        """Drops the current token before registering again; deliveries signed for it
        meanwhile still verify (it becomes the previous one)."""
        if self._token:
            self._previous_token = self._token
        self._token = ""

    def signing_tokens(self) -> list[str]:
        """The tokens deliveries may be signed for: the current one and the one before a re-registration."""
        return [t for t in (self._token, self._previous_token) if t]

    # --- life -----------------------------------------------------------

    def _registration(self) -> dict[str, Any]:
        body: dict[str, Any] = {"agent_id": self.agent_id, "capabilities": self.capabilities}
        opt: dict[str, Any] = {
            "namespace": self.namespace, "aliases": self.aliases or None, "version": self.version,
            "weight": self.weight, "max_concurrent": self.max_concurrent,
            "rollout_percent": self.rollout_percent, "ttl_seconds": self.ttl_seconds,
            "context": self.context, "metadata": self.metadata or None,
            "capability_info": self.capability_info,
        }
        body.update({k: v for k, v in opt.items() if v is not None})
        return body

    def _path(self, tail: str) -> str:
        return "/v1/agents/" + quote(self.agent_id, safe="") + tail

    def _agent_params(self) -> dict[str, str | int] | None:
        return {"namespace": self.namespace} if self.namespace else None

    async def _open(self) -> None:
        if self._started:
            raise RuntimeError("the agent is already started")
        if not self.capabilities:
            raise ValueError("the agent serves no capability: add a handler or pass capabilities=")
        if self._default is None and not self._routes:
            raise ValueError("the agent has no handler")
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._t = AsyncTransport(self.server_url, timeout=self._timeout, max_retries=2)
        workers = max(4, self.max_concurrent or 16)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"agentreach-{self.agent_id}")
        self._registered = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._wake_heartbeat = asyncio.Event()
        self._heartbeat_task = asyncio.create_task(self._life(), name=f"agentreach-heartbeat-{self.agent_id}")

    async def _life(self) -> None:
        """Start-up jitter, registration, then heartbeats until the agent stops."""
        try:
            if self.start_jitter > 0:
                wait = random.uniform(0, self.start_jitter)
                log.info("agentreach: %s waits %.1f s before registering (start-up jitter)", self.agent_id, wait)
                await asyncio.sleep(wait)
            while not self._stopping:
                if not self._token:
                    await self._register_until_done()
                    continue
                await self._sleep_heartbeat()
                if self._stopping:
                    return
                if self._token:  # else a claim found we were forgotten: register first
                    await self._heartbeat()
        except asyncio.CancelledError:
            return
        except RegistrationError as e:
            log.error("agentreach: %s", e)
            self._fatal = e
            assert self._registered is not None
            self._registered.set()
            self._on_fatal(e)

    def _on_fatal(self, err: BaseException) -> None:
        """A subclass stops what it runs when registration failed for good."""

    async def _register_until_done(self) -> None:
        backoff = 0.2
        while not self._stopping:
            try:
                await self._register()
                return
            except APIError as e:
                if 400 <= e.status < 500 and e.status not in (408, 429):
                    # A bad key, a missing scope, a bad field: trying again changes nothing.
                    raise RegistrationError(f"registering agent {self.agent_id} at {self.server_url}: {e}") from e
                log.warning("agentreach: registering %s: %s (again in %.1f s)", self.agent_id, e, backoff)
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 10.0)
            except TransportError as e:
                log.warning("agentreach: registering %s: %s (again in %.1f s)", self.agent_id, e, backoff)
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 10.0)

    async def _register(self) -> None:
        assert self._t is not None
        body = self._registration()
        resp = await self._t.call(Call("POST", "/v1/agents", json=body, bearer=self._key, idempotent=True))
        token = resp.get("token") if isinstance(resp, dict) else None
        if not isinstance(token, str) or not token:
            raise TransportError("the registry answered a registration without a token")
        if self._token:
            self._previous_token = self._token
        self._token = token
        self._set_interval(resp)
        log.info("agentreach: %s registered (%s)", self.agent_id, self.mode)
        assert self._registered is not None
        self._registered.set()

    def _set_interval(self, resp: Any) -> None:
        every = resp.get("heartbeat_interval_ms") if isinstance(resp, dict) else None
        if isinstance(every, (int, float)) and every > 0:
            self._interval = every / 1000.0

    async def _sleep_heartbeat(self) -> None:
        assert self._wake_heartbeat is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake_heartbeat.wait(), self._interval)
        self._wake_heartbeat.clear()

    def health_report(self) -> dict[str, Any]:
        """The health figures of the next heartbeat (see :class:`HealthReport`)."""
        n = self.in_flight
        rep = HealthReport(in_flight=n, queue_length=self._queue_length())
        if self.max_concurrent:
            rep.pool_usage = min(1.0, n / self.max_concurrent)
        if self._outcomes:
            rep.error_rate = sum(1 for ok in self._outcomes if not ok) / len(self._outcomes)
        if self._health is not None:
            mine = self._health()
            for name in ("in_flight", "queue_length", "error_rate", "pool_usage", "context"):
                if getattr(mine, name) is not None:
                    setattr(rep, name, getattr(mine, name))
        out: dict[str, Any] = {"in_flight": rep.in_flight}
        if rep.queue_length is not None:
            out["queue_length"] = max(0, rep.queue_length)
        if rep.error_rate is not None:
            out["error_rate"] = min(1.0, max(0.0, rep.error_rate))
        if rep.pool_usage is not None:
            out["pool_usage"] = min(1.0, max(0.0, rep.pool_usage))
        ctx = rep.context if rep.context is not None else self.context
        if ctx is not None:
            out["context"] = dict(ctx)
        return out

    def _queue_length(self) -> int | None:
        return None

    async def _heartbeat(self) -> None:
        assert self._t is not None
        try:
            resp = await self._t.call(Call("PUT", self._path("/heartbeat"), json=self.health_report(),
                                           params=self._agent_params(), bearer=self._token,
                                           credential="agent token", retries=0))
        except (NotFound, Unauthenticated) as e:
            # 404: the registry forgot us (or we went offline); 401: another
            # registration replaced our token. Either way, register again.
            log.info("agentreach: the registry does not know %s any more (%s); registering again",
                     self.agent_id, e.code)
            self._forget_token()
            return
        except (APIError, TransportError) as e:
            log.warning("agentreach: heartbeat of %s: %s", self.agent_id, e)
            return
        self.heartbeats += 1
        self._set_interval(resp)
        self._on_heartbeat(resp)

    def _on_heartbeat(self, resp: Any) -> None:
        """A subclass reads more of the heartbeat's answer (a pull worker: cancelled jobs)."""

    async def _offline(self) -> None:
        if not self._token or self._t is None:
            return
        try:
            await self._t.call(Call("POST", self._path("/offline"), json={"reason": "shutdown"},
                                    params=self._agent_params(), bearer=self._token,
                                    credential="agent token", retries=1, timeout=5.0))
            log.info("agentreach: %s is offline", self.agent_id)
        except AgentReachError as e:
            log.warning("agentreach: going offline: %s", e)

    async def _drain(self, grace: float) -> None:
        """Waits up to ``grace`` seconds for the jobs held to end, then cancels the rest."""
        assert self._idle is not None
        if self._jobs:
            log.info("agentreach: %s waits up to %.0f s for %d job(s)", self.agent_id, grace, len(self._jobs))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._idle.wait(), grace)
        for ctx in list(self._jobs.values()):
            ctx._cancel("shutdown")

    async def _close(self) -> None:
        self._stopping = True
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
        if self._t is not None:
            await self._t.aclose()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    # --- running a job --------------------------------------------------

    def _hold(self, ctx: JobContext) -> None:
        assert self._idle is not None
        self._jobs[(ctx.job_id, ctx.attempt)] = ctx
        self._idle.clear()

    def _release_hold(self, ctx: JobContext) -> None:
        assert self._idle is not None
        self._jobs.pop((ctx.job_id, ctx.attempt), None)
        if not self._jobs:
            self._idle.set()

    def cancel_job(self, job_id: str, attempt: int | None = None, reason: CancelReason = "cancelled") -> bool:
        """Ends the context of a job held here (all its attempts without ``attempt``)."""
        hit = False
        for (jid, att), ctx in list(self._jobs.items()):
            if jid == job_id and (attempt is None or att == attempt):
                if ctx._cancel(reason):
                    log.info("agentreach: job %s attempt %d: %s", jid, att, reason)
                hit = True
        return hit

    async def _run_handler(self, route: _Route, ctx: JobContext, keep: bool = False) -> _Outcome:
        """Runs the handler within the job's deadline; never raises (but CancelledError of the caller).

        With ``keep`` (Agent-Reach holds the attempt as delivered: a claim, a
        push answered 202), a handler that runs past two thirds of its time
        is kept: the SDK reports progress, extending the deadline by the
        attempt's whole time again (:meth:`_keep`).
        """
        assert self._loop is not None
        left = ctx.time_left()
        timers: list[asyncio.TimerHandle] = []
        keeper = None
        if left is not None:
            timers.append(self._loop.call_later(max(0.0, left), ctx._cancel, "deadline"))
            if keep and left > 0:
                keeper = asyncio.ensure_future(self._keep(ctx, left, timers))
        try:
            fn = route.handler
            if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):
                ctx._is_async = True
                ctx._task = asyncio.ensure_future(fn(ctx))
            else:
                assert self._pool is not None
                ctx._task = asyncio.wrap_future(self._pool.submit(fn, ctx))
            task = ctx._task
            try:
                value = await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled() or (ctx.cancelled and task.done()):
                    return _Outcome("ended")
                if ctx._is_async:  # the caller itself is cancelled: so is the handler
                    task.cancel()
                raise
            if inspect.isawaitable(value):  # a plain def answering a coroutine
                value = await value
            if ctx.cancelled:
                return _Outcome("ended")
            if value is DEFERRED:
                return _Outcome("deferred")
            return _Outcome("result", _as_result(value))
        except Refused as e:
            return _Outcome("refused", error=e)
        except JobCancelled:
            return _Outcome("ended")
        except Exception as e:  # the handler's own failure
            if ctx.cancelled:
                return _Outcome("ended")
            log.exception("agentreach: handler for %s failed on job %s", ctx.capability, ctx.job_id)
            return _Outcome("error", error=e)
        finally:
            for t in timers:
                t.cancel()
            if keeper is not None:
                keeper.cancel()

    async def _keep(self, ctx: JobContext, span: float, timers: list[asyncio.TimerHandle]) -> None:
        """Keeps a long job: at two thirds of its time, progress extending the deadline by ``span`` again.

        An attempt Agent-Reach says no longer runs (409) is cancelled; a
        report that fails otherwise leaves the deadline as it was.
        """
        assert self._loop is not None
        while not ctx.cancelled:
            left = ctx.time_left()
            if left is None:
                return
            await asyncio.sleep(max(0.0, left - span / 3))
            if ctx.cancelled:
                return
            try:
                deadline = await self.progress(ctx.delivery, extend=span)
            except Conflict:
                log.info("agentreach: job %s attempt %d no longer runs at Agent-Reach", ctx.job_id, ctx.attempt)
                ctx._cancel("cancelled")
                return
            except AgentReachError as e:
                log.warning("agentreach: the deadline of long job %s was not extended: %s", ctx.job_id, e)
                return
            if deadline is None:
                return
            ctx.delivery = replace(ctx.delivery, deadline=deadline)
            for t in timers:
                t.cancel()
            timers[:] = [self._loop.call_later(max(0.0, ctx.time_left() or 0.0), ctx._cancel, "deadline")]

    async def progress(self, delivery: Delivery, progress: Any = None, extend: float = 0.0) -> datetime | None:
        """Reports how far the work on an attempt got, and extends its deadline.

        ``progress`` is any JSON value, which the caller reads in the job's
        events (``PROGRESS``); ``extend`` (seconds) makes the deadline now +
        extend when that is later. Answers the attempt's deadline. The SDK
        calls it by itself for a handler that runs long; a handler may call
        it to say more. Raises :class:`Conflict` when the attempt no longer
        runs (finished, timed out, cancelled).
        """
        assert self._t is not None, "the agent is not started"
        body: dict[str, Any] = {"attempt": delivery.attempt, "extend_ms": int(extend * 1000)}
        if progress is not None:
            body["progress"] = progress
        url = self.server_url + "/v1/jobs/" + quote(delivery.job_id, safe="") + "/progress"
        resp = await self._t.call(Call("POST", url, json=body, bearer=self._token, credential="agent token", retries=4))
        return parse_time(resp.get("deadline")) if isinstance(resp, dict) else None

    def _count(self, outcome: _Outcome, ctx: JobContext) -> None:
        if outcome.kind == "result":
            self._outcomes.append(True)
        elif outcome.kind == "error" or (outcome.kind == "ended" and ctx.cancel_reason == "deadline"):
            self._outcomes.append(False)

    async def report(self, delivery: Delivery, result: Result | Any) -> str:
        """Posts the outcome of an attempt to its ``result_url`` with the agent's token and ``traceparent``.

        Answers how the service recorded it: ``outcome``, or ``duplicate``
        for a second result or one after the attempt timed out. Repeated on
        a lost answer (a repeat is a harmless duplicate) until the deadline.
        """
        assert self._t is not None, "the agent is not started"
        res = _as_result(result)
        headers = {}
        tp = delivery.trace_header()
        if tp:
            headers["traceparent"] = tp
        url = delivery.result_url or (self.server_url + "/v1/jobs/" + quote(delivery.job_id, safe="") + "/result")
        try:
            resp = await self._t.call(Call("POST", url, json=res.to_json(delivery.attempt), headers=headers,
                                           bearer=self._token, credential="agent token", idempotent=True,
                                           retries=4))
        finally:
            key = (delivery.job_id, delivery.attempt)
            ctx = self._jobs.get(key)
            if ctx is not None and ctx._deferred:
                self._release_hold(ctx)
        recorded = resp.get("recorded") if isinstance(resp, dict) else None
        return recorded if isinstance(recorded, str) else "outcome"

    async def _report_quietly(self, ctx: JobContext, result: Result) -> None:
        try:
            how = await self.report(ctx.delivery, result)
            if how == "duplicate":
                log.info("agentreach: result of job %s attempt %d came too late (duplicate)", ctx.job_id, ctx.attempt)
        except AgentReachError as e:
            log.warning("agentreach: reporting job %s attempt %d: %s", ctx.job_id, ctx.attempt, e)

