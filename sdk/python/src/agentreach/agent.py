"""A push agent: Agent-Reach POSTs each attempt to its endpoint.

>>> agent = Agent("ocr-1", server_url="http://127.0.0.1:8080", api_key="ark_...")
>>> @agent.handler("document:parse:ocr")
... async def ocr(job: JobContext) -> dict:
...     return {"text": "..."}
>>> agent.run(port=8001)                    # standalone; or mount agent.asgi in FastAPI

The endpoint answers ``GET`` (the registry's probe) with 200 and ``POST``
(a delivery, or a cancel notice with ``X-Reach-Cancel: 1``) after checking
its Standard Webhooks signature, keyed with the SHA-256 of the agent's token.
A ``POST`` carrying ``X-Reach-Grant`` is a direct call by a caller that
looked the agent up: its invocation grant is checked instead of a signature,
the job is marked :attr:`~agentreach.JobContext.direct`, and it is answered
inline (an ``accept=True`` handler, or ``DEFERRED``, answers 501: there is
no ``result_url`` to report to).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
from typing import Any, AsyncIterator, Awaitable, Callable, Generator, MutableMapping

import uvicorn

from ._base import AgentBase, JobContext, _Outcome, _Route
from .errors import SignatureError
from .grant import GRANT_HEADER, InvalidGrant, verify_grant
from .models import Delivery
from .signing import verify_delivery

__all__ = ["Agent", "ASGIApp"]

log = logging.getLogger("agentreach")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
#: An ASGI 3 application.
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 16 << 20

_NO_RESULT_URL = "a direct call is answered inline: there is no result_url to report to"


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the agent goes offline before the server stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def _answer(send: Send, status: int, body: Any = None, retry_after: int | None = None) -> None:
    data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _error(message: str) -> dict[str, Any]:
    return {"error": message}


class Agent(AgentBase):
    """A push agent: serves deliveries over HTTP, registers, heartbeats, goes offline on shutdown.

    Args:
        agent_id: the agent's id in its namespace.
        server_url: Agent-Reach's base URL (default ``AGENTREACH_URL``, else http://127.0.0.1:8080).
        api_key: a key with ``agents:write`` in the agent's namespace (default ``AGENTREACH_KEY``);
            heartbeats and results use the agent's own token, which registration answers.
        endpoint: the URL Agent-Reach delivers to. :meth:`run` and :meth:`serve` default it to
            the address they listen on; mounted in another app, pass where it is mounted.
        capabilities: capabilities to register besides those of the handlers.
        max_concurrent: the most attempts the agent takes at once (the registry holds to it).
        ttl_seconds: the lease (5-3600 s, default 30); heartbeats come every third of it.
        start_jitter: the longest random wait before registering (default 10 s), so a fleet
            restarting together does not stampede the registry.
        shutdown_grace: how long a shutdown waits for the jobs held (default 30 s).
        health: a function answering a :class:`~agentreach.HealthReport` to send with each
            heartbeat, over the SDK's own figures.
        verify_signatures: check every delivery's signature and every direct call's grant (default;
            turn off only in tests).
    """

    mode = "push"

    def __init__(
        self,
        agent_id: str,
        *,
        endpoint: str | None = None,
        health_url: str | None = None,
        verify_signatures: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(agent_id, **options)
        self._endpoint = endpoint
        self.health_url = health_url
        self.verify_signatures = verify_signatures
        self.metadata.setdefault("cancel_notices", True)
        self._background: set[asyncio.Task[None]] = set()
        self._stop_requested: asyncio.Event | None = None
        self._server: _Server | None = None

    @property
    def endpoint(self) -> str | None:
        """The URL registered for deliveries."""
        return self._endpoint

    def _registration(self) -> dict[str, Any]:
        body = super()._registration()
        if not self._endpoint:
            raise ValueError("a push agent needs its endpoint: pass endpoint= (where agent.asgi is mounted)")
        body["endpoint"] = self._endpoint
        if self.health_url:
            body["health_url"] = self.health_url
        return body

    # --- life -----------------------------------------------------------

    async def start(self) -> None:
        """Starts registering (after the jitter) and heartbeating; answers at once.

        Serve :attr:`asgi` at :attr:`endpoint` meanwhile.
        """
        if not self._endpoint:
            raise ValueError("a push agent needs its endpoint: pass endpoint= (where agent.asgi is mounted)")
        self._stop_requested = asyncio.Event()
        await self._open()

    async def stop(self) -> None:
        """Goes offline (no new work), waits for the jobs held up to ``shutdown_grace``, then stops."""
        if not self._started or self._stopping:
            return
        self._stopping = True
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        await self._offline()
        await self._drain(self.shutdown_grace)
        if self._background:
            await asyncio.wait(list(self._background), timeout=5.0)
        await self._close()

    def request_stop(self) -> None:
        """Asks :meth:`serve` or :meth:`run` to shut down gracefully (safe from any thread)."""
        if self._loop is not None and self._stop_requested is not None:
            self._loop.call_soon_threadsafe(self._stop_requested.set)

    def _on_fatal(self, err: BaseException) -> None:
        if self._stop_requested is not None:
            self._stop_requested.set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Agent]:
        """``async with agent.running():`` starts the agent and stops it gracefully at the end."""
        await self.start()
        try:
            yield self
        finally:
            await self.stop()

    def lifespan(self, app: object = None) -> contextlib.AbstractAsyncContextManager[None]:
        """For ``FastAPI(lifespan=agent.lifespan)`` or Starlette: runs the agent with the app."""

        @contextlib.asynccontextmanager
        async def span() -> AsyncIterator[None]:
            async with self.running():
                yield

        return span()

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        handle_signals: bool = False,
        ready: Callable[[Agent], None] | None = None,
    ) -> None:
        """Serves deliveries on ``host:port`` until :meth:`request_stop`, a fatal registration error, or
        (with ``handle_signals``) SIGINT/SIGTERM; then goes offline and stops gracefully.

        Port 0 picks a free one; :attr:`endpoint` names it once ``ready`` is called.
        Raises :class:`~agentreach.RegistrationError` if the registry refused the agent.
        """
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP named, so that asyncio sets TCP_NODELAY on each accepted
        # connection (it checks the listening socket's protocol): without it,
        # a kept-alive connection's answers wait on Nagle and delayed ACKs.
        sock = socket.socket(fam, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
        bound = sock.getsockname()[1]
        if not self._endpoint:
            shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
            self._endpoint = f"http://{shown}:{bound}/"
        config = uvicorn.Config(self.asgi, interface="asgi3", lifespan="off", log_config=None, log_level="warning",
                                access_log=False, timeout_graceful_shutdown=5)
        server = _Server(config)
        self._server = server
        server_task = asyncio.create_task(server.serve(sockets=[sock]), name=f"agentreach-serve-{self.agent_id}")
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
            stop_wait = asyncio.ensure_future(self._stop_requested.wait())
            done, _ = await asyncio.wait({server_task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
            if server_task in done:
                server_task.result()  # a server that failed to start raises here
                raise RuntimeError("the agent's HTTP server stopped by itself")
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            await self.stop()
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await server_task
            sock.close()
        if self._fatal is not None:
            raise self._fatal

    def run(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        """Serves until SIGINT or SIGTERM (blocking), then goes offline and stops gracefully.

        A registration the registry refuses for good (a missing or wrong
        key, a bad field) ends the program with that one line.
        """
        from ._base import RegistrationError

        try:
            asyncio.run(self.serve(host, port, handle_signals=True))
        except RegistrationError as e:
            raise SystemExit(f"agentreach: {e}") from None

    # --- ASGI -----------------------------------------------------------

    @property
    def asgi(self) -> ASGIApp:
        """The ASGI app that serves deliveries; mount it anywhere (``app.mount("/agent", agent.asgi)``).

        Run on its own it also takes the ASGI lifespan (start on startup,
        stop on shutdown); mounted, use :meth:`lifespan` on the host app.
        """
        return self._asgi

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as e:
                    await send({"type": "lifespan.startup.failed", "message": str(e)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method", "GET")
        if method in ("GET", "HEAD"):
            await _answer(send, 200, {"status": "ok", "agent_id": self.agent_id})
            return
        if method != "POST":
            await _answer(send, 405, _error("method not allowed"))
            return
        body = bytearray()
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            if len(body) > MAX_BODY:
                await _answer(send, 413, _error("delivery too large"))
                return
            if not msg.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        raw = bytes(body)
        grant = headers.get(GRANT_HEADER.lower(), "")
        if self.verify_signatures and not grant:
            tokens = self.signing_tokens()
            if not tokens:
                await _answer(send, 401, _error("signature does not verify: the agent is not registered yet"))
                return
            err: SignatureError | None = None
            for token in tokens:
                try:
                    verify_delivery(token, raw, headers)
                    err = None
                    break
                except SignatureError as e:
                    err = e
            if err is not None:
                log.warning("agentreach: refused a delivery to %s: %s", self.agent_id, err)
                await _answer(send, 401, _error(str(err)))
                return
        try:
            doc = json.loads(raw)
            delivery = Delivery.from_json(doc, traceparent=headers.get("traceparent"), direct=bool(grant))
        except (ValueError, AttributeError, TypeError) as e:
            await _answer(send, 400, _error(f"bad delivery: {e}"))
            return
        if grant and self.verify_signatures:
            # A direct call by a caller that looked the agent up: its grant,
            # not a signature, says Agent-Reach let it in.
            try:
                verify_grant(self.signing_tokens(), grant, self.agent_id, delivery.capability)
            except InvalidGrant as e:
                log.warning("agentreach: refused a direct call to %s: %s", self.agent_id, e)
                await _answer(send, 401, _error(str(e)))
                return
        if headers.get("x-reach-cancel") == "1":
            self.cancel_job(delivery.job_id, delivery.attempt if delivery.attempt else None)
            await _answer(send, 200, {"cancelled": True})
            return
        await self._deliver(delivery, receive, send)

    async def _deliver(self, delivery: Delivery, receive: Receive, send: Send) -> None:
        route = self._route(delivery.capability)
        if route is None:
            await _answer(send, 404, _error(f"this agent serves no {delivery.capability!r}"))
            return
        if self._stopping or not self._started:
            await _answer(send, 503, _error("the agent is shutting down"))
            return
        if self.max_concurrent and self.in_flight >= self.max_concurrent:
            # "Not now": Agent-Reach pauses the agent a second, counting no failure.
            await _answer(send, 503, _error("the agent is at max_concurrent"), retry_after=1)
            return
        if route.accept and delivery.direct:
            await _answer(send, 501, _error(_NO_RESULT_URL))
            return
        ctx = JobContext(delivery)
        self._hold(ctx)
        if route.accept:
            self._spawn(self._run_accepted(route, ctx))
            await _answer(send, 202, {"accepted": True})
            return
        watcher = asyncio.ensure_future(self._watch_disconnect(receive, ctx))
        try:
            outcome = await self._run_handler(route, ctx)
        finally:
            watcher.cancel()
        self._count(outcome, ctx)
        if outcome.kind == "deferred" and delivery.direct:
            log.warning("agentreach: job %s is a direct call, answered inline: DEFERRED answers 501", ctx.job_id)
            self._release_hold(ctx)
            await _answer(send, 501, _error(_NO_RESULT_URL))
            return
        if outcome.kind == "deferred":
            ctx._deferred = True
            self._expire_deferred(ctx)
            await _answer(send, 202, {"accepted": True})
            return
        self._release_hold(ctx)
        await self._answer_outcome(send, outcome, ctx)

    async def _answer_outcome(self, send: Send, outcome: _Outcome, ctx: JobContext) -> None:
        if outcome.kind == "result" and outcome.result is not None:
            await _answer(send, 200, outcome.result.to_json())
        elif outcome.kind == "refused":
            await _answer(send, 503, _error("refused"))
        elif outcome.kind == "ended":
            await _answer(send, 503, _error(f"the job's context ended: {ctx.cancel_reason}"))
        else:
            await _answer(send, 500, _error(f"handler failed: {type(outcome.error).__name__}"))

    @staticmethod
    async def _watch_disconnect(receive: Receive, ctx: JobContext) -> None:
        # While a handler answers inline, a closed connection means Agent-Reach gave up on it.
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                ctx._cancel("disconnected")
                return

    async def _run_accepted(self, route: _Route, ctx: JobContext) -> None:
        try:
            outcome = await self._run_handler(route, ctx, keep=True)
            self._count(outcome, ctx)
            if outcome.kind == "result" and outcome.result is not None:
                await self._report_quietly(ctx, outcome.result)
            elif outcome.kind == "deferred":
                ctx._deferred = True
                self._expire_deferred(ctx)
                return
            elif outcome.kind in ("error", "refused"):
                # No way to fail an accepted attempt but its deadline: it times out and is retried.
                log.warning("agentreach: job %s attempt %d accepted but not done (%s); it will time out",
                            ctx.job_id, ctx.attempt, outcome.kind)
        finally:
            if not ctx._deferred:
                self._release_hold(ctx)

    def _expire_deferred(self, ctx: JobContext) -> None:
        """A deferred job stops counting in flight at its deadline if it was never reported."""
        left = ctx.time_left()
        if left is None or self._loop is None:
            return

        def expire() -> None:
            if (ctx.job_id, ctx.attempt) in self._jobs:
                ctx._cancel("deadline")
                self._release_hold(ctx)

        self._loop.call_later(max(0.0, left) + 1.0, expire)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

