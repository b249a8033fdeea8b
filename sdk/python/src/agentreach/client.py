"""The caller's side: submit jobs by capability, follow them, cancel and replay them (brokered);
or look a capability's agents up and call the best one directly (lookup mode: ``lookup``,
``invoke``, ``report``, ``flush``, ``watch``; see :mod:`agentreach.direct`).

:class:`Client` is synchronous, :class:`AsyncClient` the same with ``await``.
Both take the service's URL and an API key (defaults: ``AGENTREACH_URL``,
``AGENTREACH_KEY``) and raise the typed errors of :mod:`agentreach.errors`.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import os
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Callable, Iterator, Mapping
from urllib.parse import quote

import httpx

from ._transport import USER_AGENT, AsyncTransport, Call, SyncTransport, env_key, env_url
from .direct import (
    MAX_AGENT_ANSWER,
    AgentChange,
    AnswerTooLarge,
    CallMemory,
    Candidate,
    DirectReport,
    Invocation,
    InvokeResult,
    LookupCache,
    LookupResult,
    Question,
    ReportQueue,
    encode_payload,
    http_constraints,
    keep_for_later,
    question,
    refused_index,
    report_body,
    unreachable,
    watch_feed,
)
from .errors import AgentReachError, APIError, InvalidArgument, TransportError, WaitTimeout
from .models import Job, JobEvent, JobPage, JobSummary, Submitted

__all__ = ["Client", "AsyncClient"]

log = logging.getLogger("agentreach")


def _job_path(job_id: str, tail: str = "") -> str:
    return "/v1/jobs/" + quote(job_id, safe="") + tail


def _submit_call(
    key: str | None,
    capability: str,
    payload: Any,
    idempotency_key: str | None,
    options: Mapping[str, Any],
) -> Call:
    body: dict[str, Any] = {"payload": payload}
    if capability:
        body["capability"] = capability
    body.update({k: v for k, v in options.items() if v is not None and v != ""})
    # A key is always sent, so a retry after a lost answer returns the same job.
    ik = idempotency_key or str(uuid.uuid4())
    return Call("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": ik}, bearer=key, idempotent=True)


def _list_params(
    status: str | None, capability: str | None, agent_id: str | None, namespace: str | None,
    limit: int | None, cursor: str | None,
) -> dict[str, str | int]:
    raw: dict[str, str | int | None] = {
        "status": status, "capability": capability, "agent_id": agent_id,
        "namespace": namespace, "limit": limit, "cursor": cursor,
    }
    return {k: v for k, v in raw.items() if v is not None and v != ""}


def _events(body: Any) -> list[JobEvent]:
    rows = body.get("events") if isinstance(body, dict) else None
    return [JobEvent.from_json(r) for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


# How long one read of wait() or run() asks the service to hold it
# (wait_ms): the service answers the moment the job ends.
_LONG_POLL = 20.0


def _hold(end: float | None, now: float) -> float:
    """How long the next read may wait: 20 s, or what is left before ``end``."""
    return _LONG_POLL if end is None else max(0.0, min(_LONG_POLL, end - now))


def _wait_call(key: str | None, job_id: str, hold: float) -> Call:
    return Call("GET", _job_path(job_id), params={"wait_ms": int(hold * 1000)}, bearer=key, idempotent=True,
                timeout=hold + 10.0)


def _run_call(key: str | None, capability: str, payload: Any, submit: dict[str, Any], hold: float,
              opts: Callable[[dict[str, Any]], dict[str, Any]]) -> Call:
    """A submit that waits up to ``hold`` for the job's end (``wait_ms``)."""
    ik = submit.pop("idempotency_key", None)
    if submit.get("constraints"):
        submit["constraints"] = dict(submit["constraints"])
    call = _submit_call(key, capability, payload, ik, opts(dict(submit, wait_ms=int(hold * 1000))))
    call.timeout = hold + 10.0
    return call


def _wait_refused(e: APIError) -> bool:
    """The service refused the wait itself: a key at its bound of waits, or one older than ``wait_ms``."""
    return e.code == "rate_limited" or (e.code == "invalid_argument" and e.field == "wait_ms")


def _ran(body: Any) -> Job | str:
    """What a submit with ``wait_ms`` answered: the ended job (200), or the id to wait for (202)."""
    job = Job.from_json(body)
    return job if job.terminal else job.job_id


def _poll_waits(first: float, most: float) -> Iterator[float]:
    wait = first
    while True:
        yield wait
        wait = min(wait * 1.5, most)


class _Options:
    """What both clients hold: where the service is, which key to send, and lookup mode's state."""

    def __init__(
        self,
        url: str | None,
        api_key: str | None,
        namespace: str | None,
        *,
        cache_size: int = 256,
        cache_file: str | os.PathLike[str] | None = None,
        lookup_timeout: float = 5.0,
        candidate_timeout: float = 30.0,
        report_batch: int = 100,
        report_interval: float = 1.0,
        watch: bool = False,
        on_agent_change: Callable[[AgentChange], None] | None = None,
        quarantine: float = 30.0,
    ) -> None:
        self.url = env_url(url)
        self._memory = CallMemory(quarantine)
        self._key = env_key(api_key)
        self.namespace = namespace
        self._cache = LookupCache(cache_size, cache_file)
        self._reports = ReportQueue(report_batch)
        self._lookup_timeout = lookup_timeout
        self._candidate_timeout = candidate_timeout
        self._report_interval = report_interval if report_interval > 0 else 1.0
        self._watch_wanted = watch
        self._on_change = on_agent_change
        self._closed = False

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(url={self.url!r}, namespace={self.namespace!r})"

    def _opts(self, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("namespace") is None and self.namespace:
            options["namespace"] = self.namespace
        return options

    def _question(self, capability: str, hint: str | None, namespace: str | None,
                  constraints: Mapping[str, Any] | None, limit: int | None) -> Question:
        return question(capability, hint, namespace or self.namespace, constraints, limit)

    def _lookup_call(self, q: Question) -> Call:
        return Call("POST", "/v1/lookup", json=q.body, bearer=self._key, idempotent=True,
                    timeout=self._lookup_timeout)

    def _lookup_answer(self, q: Question, ans: Any, fetched: float) -> LookupResult:
        m = ans if isinstance(ans, dict) else {}
        cands = [Candidate.from_json(c) for c in m.get("candidates") or [] if isinstance(c, dict)]
        ttl = m.get("ttl_ms")
        wf = m.get("watch_from")
        return LookupResult(cands, ttl / 1000.0 if isinstance(ttl, (int, float)) else 0.0,
                            datetime.fromtimestamp(fetched, timezone.utc), False, False,
                            wf if isinstance(wf, int) else 0)

    def _stale_or_raise(self, q: Question, err: AgentReachError) -> LookupResult:
        if unreachable(err):
            st = self._cache.stale(q.key)
            if st is not None:
                log.info("agentreach: the registry is unreachable (%s); serving the last known list for %s",
                         err, q.capability)
                return st
        raise err

    def _watch_headers(self) -> dict[str, str]:
        h = {"User-Agent": USER_AGENT}
        if self._key:
            h["Authorization"] = "Bearer " + self._key
        return h

    def _queue_report(self, inv: Invocation) -> bool:
        """Queues the report of the invocation's last attempt, if it makes one; answers whether a batch is full."""
        rep = inv.report()
        return self._reports.add([rep]) if rep is not None else False


class _SyncFlight:
    """One lookup request under way, which every thread asking the same question waits for."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.answer: Any = None
        self.fetched = 0.0
        self.error: AgentReachError | None = None


def _read_limited(chunks: Iterator[bytes], started: float, timeout: float) -> bytes:
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > MAX_AGENT_ANSWER:
            raise AnswerTooLarge(f"answered more than {MAX_AGENT_ANSWER >> 20} MiB")
        if time.monotonic() - started > timeout:
            raise httpx.ReadTimeout("the answer took too long")
    return bytes(out)


class Client(_Options):
    """A synchronous caller of Agent-Reach.

    >>> with Client("http://127.0.0.1:8080", api_key="ark_...") as c:
    ...     job = c.run("document:parse:ocr", {"url": "x.pdf"}, timeout=30)   # brokered
    ...     res = c.invoke("document:parse:ocr", {"url": "x.pdf"})            # directly

    Args:
        url: the service's base URL (default ``AGENTREACH_URL``, else http://127.0.0.1:8080).
        api_key: a key with the scopes the calls need (default ``AGENTREACH_KEY``).
        namespace: the namespace submits and lists name when they name none.
        timeout: seconds for one HTTP request.
        max_retries: how often a call that can safely be repeated is tried again.
        http: an ``httpx.Client`` to use instead of the client's own.
        agent_http: the ``httpx.Client`` that calls agents directly (``invoke``); never one
            that sends the API key.
        cache_size: how many lookup answers to keep, least recently used out first (0: never
            serve one from memory).
        cache_file: a file to keep the last candidate lists in (mode 0600: it holds grants), read
            at start, so that a client started while Agent-Reach is unreachable, or losing it
            later, serves them (``stale``) until the registry answers again.
        lookup_timeout: seconds one lookup request has before the registry counts as unreachable.
        candidate_timeout: the longest one candidate of ``invoke`` has to answer before the next is tried;
            once ten calls of a capability answered, 3 x their p99 (at least 1 s) when that is shorter.
        quarantine: seconds a candidate ``invoke`` could not reach, or that did not answer in time, is
            tried after every other one (0: never).
        report_batch, report_interval: outcome reports are sent when ``report_batch`` are pending,
            or every ``report_interval`` seconds, and at ``flush`` and close.
        watch: follow the registry's agent changes (``watch()``) for the client's whole life.
        on_agent_change: called with every change the watch feed reads, after the cache applied it.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        namespace: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        http: httpx.Client | None = None,
        agent_http: httpx.Client | None = None,
        cache_size: int = 256,
        cache_file: str | os.PathLike[str] | None = None,
        lookup_timeout: float = 5.0,
        candidate_timeout: float = 30.0,
        report_batch: int = 100,
        report_interval: float = 1.0,
        watch: bool = False,
        on_agent_change: Callable[[AgentChange], None] | None = None,
        quarantine: float = 30.0,
    ) -> None:
        super().__init__(url, api_key, namespace, cache_size=cache_size, cache_file=cache_file,
                         lookup_timeout=lookup_timeout, candidate_timeout=candidate_timeout,
                         report_batch=report_batch, report_interval=report_interval, watch=watch,
                         on_agent_change=on_agent_change, quarantine=quarantine)
        self._t = SyncTransport(self.url, timeout=timeout, max_retries=max_retries, http=http)
        self._own_agents = agent_http is None
        self._agents = agent_http or httpx.Client(timeout=self._candidate_timeout)
        self._flights: dict[str, _SyncFlight] = {}
        self._flight_lock = threading.Lock()
        self._bg_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._kick = threading.Event()
        self._stopping = threading.Event()
        self._reporter: threading.Thread | None = None
        self._watcher: threading.Thread | None = None
        self._watch_ready = threading.Event()
        self._watch_loop: asyncio.AbstractEventLoop | None = None
        self._watch_task: asyncio.Task[None] | None = None
        if self._watch_wanted:
            self.watch()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the watch feed and the report sender, sends the reports still pending, and
        closes the connections (not an ``http`` or ``agent_http`` client passed in).

        A report that cannot be sent then is logged and dropped; call
        :meth:`flush` first to learn why.
        """
        with self._bg_lock:
            if self._closed:
                return
            self._closed = True
        self._stop_watch()
        self._stopping.set()
        self._kick.set()
        if self._reporter is not None:
            self._reporter.join(30)
        self._reports.closed = True
        try:
            self.flush()
        except AgentReachError as e:
            log.warning("agentreach: %d report(s) not sent at close: %s", len(self._reports), e)
        if self._own_agents:
            self._agents.close()
        self._t.close()

    def _call(self, call: Call) -> Any:
        return self._t.call(call)

    def submit(
        self,
        capability: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        namespace: str | None = None,
        hint: str | None = None,
        priority: str | None = None,
        timeout_ms: int | None = None,
        max_attempts: int | None = None,
        callback_url: str | None = None,
        parent_job_id: str | None = None,
        constraints: Mapping[str, Any] | None = None,
        retry_on_failed: bool | None = None,
        backoff_base_ms: int | None = None,
        backoff_max_ms: int | None = None,
        route_wait_ms: int | None = None,
        ordering_key: str | None = None,
        intent: str | None = None,
    ) -> Submitted:
        """Submits a job; answers once it is committed (``SUBMITTED``).

        With ``intent`` (the caller's words) instead of a ``capability``
        (pass ``""``), the service resolves it to a capability of the
        namespace's catalogue first; the job's events hold the explanation.

        The same ``idempotency_key`` with the same body answers the same job
        for 24 hours (with another body: :class:`~agentreach.errors.Conflict`).
        Without one a fresh key is made, so the SDK's own retries never
        submit twice.
        """
        opts = self._opts(dict(namespace=namespace, hint=hint, priority=priority, timeout_ms=timeout_ms,
                               max_attempts=max_attempts, callback_url=callback_url, parent_job_id=parent_job_id,
                               constraints=dict(constraints) if constraints else None, retry_on_failed=retry_on_failed,
                               backoff_base_ms=backoff_base_ms, backoff_max_ms=backoff_max_ms,
                               route_wait_ms=route_wait_ms, ordering_key=ordering_key, intent=intent))
        return Submitted.from_json(self._call(_submit_call(self._key, capability, payload, idempotency_key, opts)))

    def resolve(self, intent: str, *, namespace: str | None = None) -> dict[str, Any]:
        """Resolves an intent to a capability of the namespace's catalogue, and says why.

        Answers the resolution: ``capability``, ``resolver``, ``confidence``
        against ``threshold``, ``reason``, ``candidates`` and every
        resolver's ``steps``. Raises :class:`~agentreach.errors.APIError` with
        code ``ambiguous_intent`` (422) when no resolver is confident.
        """
        body = {"intent": intent, "namespace": namespace or self.namespace}
        out: dict[str, Any] = self._call(Call("POST", "/v1/resolve", json={k: v for k, v in body.items() if v},
                                              bearer=self._key, idempotent=True))
        return out

    def get(self, job_id: str) -> Job:
        """The job now. Raises :class:`~agentreach.errors.NotFound` for an unknown id."""
        return Job.from_json(self._call(Call("GET", _job_path(job_id), bearer=self._key, idempotent=True)))

    def wait(self, job_id: str, *, timeout: float | None = 60.0, poll: float = 0.1, max_poll: float = 1.0) -> Job:
        """Answers the job once it is terminal.

        Each read asks the service to hold it until the job ends (``wait_ms``,
        up to 20 s a read), so the job comes back as soon as it ends; a
        service that answers at once (one older than ``wait_ms``) is polled
        every ``poll`` seconds, growing to ``max_poll``. Raises
        :class:`~agentreach.errors.WaitTimeout` (holding the job as last
        seen) when ``timeout`` seconds pass first; ``None`` waits for ever.
        """
        end = None if timeout is None else time.monotonic() + timeout
        polls = _poll_waits(poll, max_poll)
        polling = False
        while True:
            began = time.monotonic()
            hold = 0.0 if polling else _hold(end, began)
            try:
                job = Job.from_json(self._call(_wait_call(self._key, job_id, hold)))
            except APIError as e:
                if hold > 0 and _wait_refused(e):
                    polling = True  # the key holds as many waits as the service allows: poll
                    continue
                raise
            if job.terminal:
                return job
            now = time.monotonic()
            if end is not None and now >= end:
                raise WaitTimeout(f"job {job_id} is still {job.status} after {timeout} s", job)
            if now - began >= hold / 2:
                continue  # the service held the read: ask again at once
            time.sleep(next(polls) if end is None else min(next(polls), end - now))

    def run(self, capability: str, payload: Any, *, timeout: float | None = 60.0, **submit: Any) -> Job:
        """Submits a job and answers it once it has ended.

        The submit itself waits for the end (``wait_ms``), so a job that ends
        within 20 s comes back in one round trip; a longer one is waited for
        with :meth:`wait`. ``submit`` takes :meth:`submit`'s options.
        """
        end = None if timeout is None else time.monotonic() + timeout
        ik = submit.pop("idempotency_key", None) or str(uuid.uuid4())  # the fallback submit is the same submit
        try:
            ran = _ran(self._call(_run_call(self._key, capability, payload, dict(submit, idempotency_key=ik),
                                            _hold(end, time.monotonic()), self._opts)))
        except APIError as e:
            if not _wait_refused(e):
                raise
            ran = self.submit(capability, payload, idempotency_key=ik, **submit).job_id
        if isinstance(ran, Job):
            return ran
        return self.wait(ran, timeout=None if end is None else max(0.0, end - time.monotonic()))

    def list(
        self,
        *,
        status: str | None = None,
        capability: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        """One page of jobs, newest first; pass ``next_cursor`` on for the next."""
        params = _list_params(status, capability, agent_id, namespace or self.namespace, limit, cursor)
        return JobPage.from_json(self._call(Call("GET", "/v1/jobs", params=params, bearer=self._key, idempotent=True)))

    def iter_jobs(
        self,
        *,
        status: str | None = None,
        capability: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        page_size: int = 100,
    ) -> Iterator[JobSummary]:
        """Every job that matches, newest first, page after page."""
        cursor: str | None = None
        while True:
            page = self.list(status=status, capability=capability, agent_id=agent_id, namespace=namespace,
                             limit=page_size, cursor=cursor)
            yield from page.jobs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def events(self, job_id: str) -> builtins.list[JobEvent]:
        """The job's audit trail, in order."""
        return _events(self._call(Call("GET", _job_path(job_id, "/events"), bearer=self._key, idempotent=True)))

    def cancel(self, job_id: str, *, reason: str | None = None) -> Job:
        """Cancels a job that is not terminal (a terminal one: :class:`~agentreach.errors.Conflict`)."""
        body = {"reason": reason} if reason else {}
        return Job.from_json(self._call(Call("POST", _job_path(job_id, "/cancel"), json=body, bearer=self._key)))

    def replay(self, job_id: str) -> Submitted:
        """Submits a dead-lettered job again, as a new job with ``replay_of``."""
        return Submitted.from_json(self._call(Call("POST", _job_path(job_id, "/replay"), json={}, bearer=self._key)))

    def callback_secrets(self, namespace: str | None = None) -> builtins.list[str]:
        """The secrets that sign the namespace's callbacks, current first (needs an admin key)."""
        params = _list_params(None, None, None, namespace or self.namespace, None, None)
        body = self._call(Call("GET", "/v1/callbacks/secret", params=params, bearer=self._key, idempotent=True))
        return _secrets(body)

    # --- lookup mode ------------------------------------------------------

    def lookup(
        self,
        capability: str,
        *,
        hint: str | None = None,
        namespace: str | None = None,
        constraints: Mapping[str, Any] | None = None,
        limit: int | None = None,
        no_cache: bool = False,
    ) -> LookupResult:
        """The ranked candidates for ``capability`` to call directly (``POST /v1/lookup``, scope
        ``agents:lookup``), each with an invocation grant.

        From the cache while its answer is fresh (the answer's ``ttl_ms``,
        capped by the earliest grant's expiry, and cut short by the watch
        feed), else from the registry; threads asking the same question at
        once make one request. When the registry is unreachable (no answer,
        502, 503, 504) and a list for the same lookup is known, that list is
        answered with ``stale`` set. A candidate in SUSPECT, DOWN, OFFLINE,
        DRAINING or PROBING is never served from the cache.
        """
        q = self._question(capability, hint, namespace, constraints, limit)
        if not no_cache:
            hit = self._cache.fresh(q.key, time.time())
            if hit is not None:
                return hit
        with self._flight_lock:
            flight = self._flights.get(q.key)
            lead = flight is None
            if flight is None:
                flight = self._flights[q.key] = _SyncFlight()
        if lead:
            try:
                seq = self._cache.sequence()
                flight.answer = self._call(self._lookup_call(q))
                flight.fetched = time.time()
                self._cache.store(q, flight.answer if isinstance(flight.answer, dict) else {}, flight.fetched, seq)
            except AgentReachError as e:
                flight.error = e
            finally:
                if flight.error is None and flight.fetched == 0.0:
                    flight.error = TransportError(f"the lookup of {capability} was interrupted")
                with self._flight_lock:
                    self._flights.pop(q.key, None)
                flight.done.set()
        else:
            flight.done.wait()
        if flight.error is not None:
            return self._stale_or_raise(q, flight.error)
        return self._lookup_answer(q, flight.answer, flight.fetched)

    def invoke(
        self,
        capability: str,
        payload: Any,
        *,
        hint: str | None = None,
        namespace: str | None = None,
        constraints: Mapping[str, Any] | None = None,
        limit: int | None = None,
        no_cache: bool = False,
        timeout: float | None = None,
        traceparent: str | None = None,
        hedge: float | None = None,
    ) -> InvokeResult:
        """Calls the best candidate for ``capability`` directly, with its grant, and answers its result.

        The candidates come from :meth:`lookup` (protocol ``http`` by
        default, the only one it speaks). A connection error, a timeout
        (``timeout``, default ``candidate_timeout``), a 5xx, a refused grant
        (401, 403) or an answer that is not a result moves on to the next; a
        200 with SUCCESS or FAILED ends it (FAILED is the agent's business
        failure: not failed over). Each agent gets the envelope of a
        brokered delivery (``job_id`` a fresh UUID v7, ``attempt`` counting
        the candidates tried, an empty ``result_url``) with
        ``X-Reach-Grant`` and ``traceparent`` (continuing ``traceparent`` when
        given). Every call's outcome is queued as a report, but a refused
        grant's. ``hedge`` (seconds; only for an idempotent capability, as
        two agents may both do the work) races a candidate that has not
        answered within it with the next, one more each ``hedge``: the first
        result wins, and the calls still running are left to end unread.
        Raises :class:`~agentreach.NoCandidates` (its ``attempts`` say what
        each did) and the lookup's errors.
        """
        body = encode_payload(payload)
        cons = http_constraints(constraints)
        res = self.lookup(capability, hint=hint, namespace=namespace, constraints=cons, limit=limit,
                          no_cache=no_cache)
        inv = Invocation(capability, body, res, timeout, traceparent, self._memory, self._candidate_timeout)
        cands = list(inv.candidates())
        try:
            if hedge:
                out = self._race(inv, cands, hedge)
                if out is not None:
                    return out
            for i, cand in enumerate([] if hedge else cands, 1):
                self._call_agent(inv, cand, i)()
                if self._queue_report(inv):
                    self._kick.set()
                out = inv.outcome()
                if out is not None:
                    return out
        finally:
            if len(self._reports):
                self._start_reporter()
        raise inv.error()

    def _race(self, inv: Invocation, cands: builtins.list[Candidate], hedge: float) -> InvokeResult | None:
        """Calls the candidates, each on a thread, one more each ``hedge`` (or when none is running), until
        one answers a result; the calls still running are left to end unread."""
        pool = ThreadPoolExecutor(max_workers=max(len(cands), 1), thread_name_prefix="agentreach-hedge")
        running: set[Future[Callable[[], None]]] = set()
        started = 0

        def start() -> None:
            nonlocal started
            started += 1
            running.add(pool.submit(self._call_agent, inv, cands[started - 1], started))

        try:
            if cands:
                start()
            while running:
                done, _ = wait(running, timeout=hedge if started < len(cands) else None, return_when=FIRST_COMPLETED)
                if not done:
                    start()
                    continue
                for f in done:
                    running.discard(f)
                    f.result()()
                    if self._queue_report(inv):
                        self._kick.set()
                    out = inv.outcome()
                    if out is not None:
                        return out
                if not running and started < len(cands):
                    start()
            return None
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _call_agent(self, inv: Invocation, cand: Candidate, attempt: int) -> Callable[[], None]:
        """Calls ``cand``; answers how to record what happened in ``inv``."""
        content, headers = inv.request(cand, attempt)
        started = time.monotonic()
        try:
            with self._agents.stream("POST", cand.endpoint, content=content, headers=headers,
                                     timeout=inv.timeout) as resp:
                raw = _read_limited(resp.iter_bytes(), started, inv.timeout)
            latency, status = time.monotonic() - started, resp.status_code
            return lambda: inv.answered(cand, status, raw, latency)
        except httpx.TimeoutException:
            why = f"no answer within {inv.timeout:g} s"
        except (httpx.HTTPError, httpx.InvalidURL, AnswerTooLarge) as e:
            why = f"{type(e).__name__}: {e}".rstrip(": ")
        latency = time.monotonic() - started
        return lambda: inv.failed(cand, why, latency)

    def report(self, *reports: DirectReport) -> None:
        """Queues reports of calls made to a lookup's candidates by other means, to be sent with
        :meth:`invoke`'s (dropped once the client is closed)."""
        if self._reports.add(reports):
            self._kick.set()
        if len(self._reports):
            self._start_reporter()

    def flush(self) -> None:
        """Sends every report queued so far and answers when they are accepted.

        Reports not sent for want of an answer (or a 429) stay queued; a
        report the service refuses by index (``reports[i]``) is dropped,
        logged, and the rest sent again. Raises the error of a batch not sent.
        """
        with self._send_lock:
            while True:
                batch = self._reports.take()
                if not batch:
                    return
                try:
                    while True:
                        try:
                            self._call(Call("POST", "/v1/reports", json=report_body(batch), bearer=self._key))
                            break
                        except InvalidArgument as e:
                            i = refused_index(e, len(batch))
                            if i is None:
                                raise
                            log.warning("agentreach: the report on %s was refused (%s); dropped",
                                        batch[i].agent_id, e.message)
                            batch = batch[:i] + batch[i + 1:]
                            if not batch:
                                break
                except BaseException as e:
                    if not isinstance(e, AgentReachError) or keep_for_later(e):
                        self._reports.requeue(batch)
                    raise

    def _start_reporter(self) -> None:
        with self._bg_lock:
            if self._reporter is not None or self._closed:
                return
            self._reporter = threading.Thread(target=self._report_loop, name="agentreach-reports", daemon=True)
            self._reporter.start()

    def _report_loop(self) -> None:
        while True:
            self._kick.wait(self._report_interval)
            self._kick.clear()
            if self._stopping.is_set():
                return
            try:
                self.flush()
            except AgentReachError as e:
                log.warning("agentreach: reports not sent: %s", e)

    def watch(self) -> None:
        """Follows the registry's agent changes (``GET /v1/agents/watch``, scope ``agents:read`` or
        ``agents:lookup``) on a thread of its own until the client is closed, applying each to the
        lookup cache: an agent that leaves HEALTHY or deregisters is dropped from every cached
        list at once, and other changes make their namespace's lists ask the registry again.

        It reconnects after a lost connection, resuming after the last event
        it read (``Last-Event-ID``) or, before any, from the oldest cached
        answer's ``watch_from``. A 401 or 403 ends it (logged). A second call
        does nothing.
        """
        with self._bg_lock:
            if self._closed or self._watcher is not None:
                return
            self._watcher = threading.Thread(target=self._watch_main, name="agentreach-watch", daemon=True)
            self._watcher.start()

    def _watch_main(self) -> None:
        async def main() -> None:
            self._watch_loop = asyncio.get_running_loop()
            self._watch_task = asyncio.current_task()
            self._watch_ready.set()
            if self._closed:
                return
            try:
                async with httpx.AsyncClient() as http:
                    await watch_feed(http, self.url, self._watch_headers(), self._cache, self._on_change)
            except asyncio.CancelledError:
                pass

        asyncio.run(main())

    def _stop_watch(self) -> None:
        if self._watcher is None:
            return
        self._watch_ready.wait(10)
        loop, task = self._watch_loop, self._watch_task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(task.cancel)
        self._watcher.join(10)


def _secrets(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return []
    out = [s for s in body.get("secrets") or [] if isinstance(s, str)]
    if not out and isinstance(body.get("secret"), str):
        out = [body["secret"]]
    return out


class AsyncClient(_Options):
    """The asyncio twin of :class:`Client`: the same methods and arguments, awaited.

    Its background work (the report sender, the watch feed) runs as tasks
    of the loop it is used on; use it on one loop.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        namespace: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        http: httpx.AsyncClient | None = None,
        agent_http: httpx.AsyncClient | None = None,
        cache_size: int = 256,
        cache_file: str | os.PathLike[str] | None = None,
        lookup_timeout: float = 5.0,
        candidate_timeout: float = 30.0,
        report_batch: int = 100,
        report_interval: float = 1.0,
        watch: bool = False,
        on_agent_change: Callable[[AgentChange], None] | None = None,
        quarantine: float = 30.0,
    ) -> None:
        super().__init__(url, api_key, namespace, cache_size=cache_size, cache_file=cache_file,
                         lookup_timeout=lookup_timeout, candidate_timeout=candidate_timeout,
                         report_batch=report_batch, report_interval=report_interval, watch=watch,
                         on_agent_change=on_agent_change, quarantine=quarantine)
        self._t = AsyncTransport(self.url, timeout=timeout, max_retries=max_retries, http=http)
        self._own_agents = agent_http is None
        self._agents = agent_http or httpx.AsyncClient(timeout=self._candidate_timeout)
        self._flights: dict[str, asyncio.Future[tuple[Any, float]]] = {}
        self._send_lock = asyncio.Lock()
        self._kick: asyncio.Event | None = None
        self._reporter: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncClient:
        if self._watch_wanted:
            self.watch()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """See :meth:`Client.close`."""
        if self._closed:
            return
        self._closed = True
        for task in (self._watcher, self._reporter):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._reports.closed = True
        try:
            await self.flush()
        except AgentReachError as e:
            log.warning("agentreach: %d report(s) not sent at close: %s", len(self._reports), e)
        if self._own_agents:
            await self._agents.aclose()
        await self._t.aclose()

    async def _call(self, call: Call) -> Any:
        return await self._t.call(call)

    async def submit(
        self,
        capability: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        namespace: str | None = None,
        hint: str | None = None,
        priority: str | None = None,
        timeout_ms: int | None = None,
        max_attempts: int | None = None,
        callback_url: str | None = None,
        parent_job_id: str | None = None,
        constraints: Mapping[str, Any] | None = None,
        retry_on_failed: bool | None = None,
        backoff_base_ms: int | None = None,
        backoff_max_ms: int | None = None,
        route_wait_ms: int | None = None,
        ordering_key: str | None = None,
        intent: str | None = None,
    ) -> Submitted:
        """See :meth:`Client.submit`."""
        opts = self._opts(dict(namespace=namespace, hint=hint, priority=priority, timeout_ms=timeout_ms,
                               max_attempts=max_attempts, callback_url=callback_url, parent_job_id=parent_job_id,
                               constraints=dict(constraints) if constraints else None, retry_on_failed=retry_on_failed,
                               backoff_base_ms=backoff_base_ms, backoff_max_ms=backoff_max_ms,
                               route_wait_ms=route_wait_ms, ordering_key=ordering_key, intent=intent))
        return Submitted.from_json(await self._call(_submit_call(self._key, capability, payload, idempotency_key, opts)))

    async def resolve(self, intent: str, *, namespace: str | None = None) -> dict[str, Any]:
        """See :meth:`Client.resolve`."""
        body = {"intent": intent, "namespace": namespace or self.namespace}
        out: dict[str, Any] = await self._call(Call("POST", "/v1/resolve", json={k: v for k, v in body.items() if v},
                                                    bearer=self._key, idempotent=True))
        return out

    async def get(self, job_id: str) -> Job:
        """See :meth:`Client.get`."""
        return Job.from_json(await self._call(Call("GET", _job_path(job_id), bearer=self._key, idempotent=True)))

    async def wait(self, job_id: str, *, timeout: float | None = 60.0, poll: float = 0.1, max_poll: float = 1.0) -> Job:
        """See :meth:`Client.wait`."""
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        polls = _poll_waits(poll, max_poll)
        polling = False
        while True:
            began = loop.time()
            hold = 0.0 if polling else _hold(end, began)
            try:
                job = Job.from_json(await self._call(_wait_call(self._key, job_id, hold)))
            except APIError as e:
                if hold > 0 and _wait_refused(e):
                    polling = True  # the key holds as many waits as the service allows: poll
                    continue
                raise
            if job.terminal:
                return job
            now = loop.time()
            if end is not None and now >= end:
                raise WaitTimeout(f"job {job_id} is still {job.status} after {timeout} s", job)
            if now - began >= hold / 2:
                continue  # the service held the read: ask again at once
            await asyncio.sleep(next(polls) if end is None else min(next(polls), end - now))

    async def run(self, capability: str, payload: Any, *, timeout: float | None = 60.0, **submit: Any) -> Job:
        """See :meth:`Client.run`."""
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        ik = submit.pop("idempotency_key", None) or str(uuid.uuid4())  # the fallback submit is the same submit
        try:
            ran = _ran(await self._call(_run_call(self._key, capability, payload, dict(submit, idempotency_key=ik),
                                                  _hold(end, loop.time()), self._opts)))
        except APIError as e:
            if not _wait_refused(e):
                raise
            ran = (await self.submit(capability, payload, idempotency_key=ik, **submit)).job_id
        if isinstance(ran, Job):
            return ran
        return await self.wait(ran, timeout=None if end is None else max(0.0, end - loop.time()))

    async def list(
        self,
        *,
        status: str | None = None,
        capability: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        """See :meth:`Client.list`."""
        params = _list_params(status, capability, agent_id, namespace or self.namespace, limit, cursor)
        return JobPage.from_json(await self._call(Call("GET", "/v1/jobs", params=params, bearer=self._key,
                                                       idempotent=True)))

    async def iter_jobs(
        self,
        *,
        status: str | None = None,
        capability: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[JobSummary]:
        """See :meth:`Client.iter_jobs`."""
        cursor: str | None = None
        while True:
            page = await self.list(status=status, capability=capability, agent_id=agent_id, namespace=namespace,
                                   limit=page_size, cursor=cursor)
            for j in page.jobs:
                yield j
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def events(self, job_id: str) -> builtins.list[JobEvent]:
        """See :meth:`Client.events`."""
        return _events(await self._call(Call("GET", _job_path(job_id, "/events"), bearer=self._key, idempotent=True)))

    async def cancel(self, job_id: str, *, reason: str | None = None) -> Job:
        """See :meth:`Client.cancel`."""
        body = {"reason": reason} if reason else {}
        return Job.from_json(await self._call(Call("POST", _job_path(job_id, "/cancel"), json=body, bearer=self._key)))

    async def replay(self, job_id: str) -> Submitted:
        """See :meth:`Client.replay`."""
        return Submitted.from_json(await self._call(Call("POST", _job_path(job_id, "/replay"), json={},
                                                         bearer=self._key)))

    async def callback_secrets(self, namespace: str | None = None) -> builtins.list[str]:
        """See :meth:`Client.callback_secrets`."""
        params = _list_params(None, None, None, namespace or self.namespace, None, None)
        body = await self._call(Call("GET", "/v1/callbacks/secret", params=params, bearer=self._key, idempotent=True))
        return _secrets(body)

    # --- lookup mode ------------------------------------------------------

    async def lookup(
        self,
        capability: str,
        *,
        hint: str | None = None,
        namespace: str | None = None,
        constraints: Mapping[str, Any] | None = None,
        limit: int | None = None,
        no_cache: bool = False,
    ) -> LookupResult:
        """See :meth:`Client.lookup`; the request runs as a task of its own, so a caller that
        gives up does not fail the others waiting for it."""
        if self._watch_wanted and self._watcher is None:
            self.watch()
        q = self._question(capability, hint, namespace, constraints, limit)
        if not no_cache:
            hit = self._cache.fresh(q.key, time.time())
            if hit is not None:
                return hit
        flight = self._flights.get(q.key)
        if flight is None:
            flight = asyncio.ensure_future(self._lookup_remote(q))
            self._flights[q.key] = flight
            flight.add_done_callback(lambda f: self._landed(q.key, f))
        try:
            ans, fetched = await asyncio.shield(flight)
        except AgentReachError as e:
            return self._stale_or_raise(q, e)
        return self._lookup_answer(q, ans, fetched)

    def _landed(self, key: str, flight: asyncio.Future[tuple[Any, float]]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.cancelled():
            flight.exception()  # retrieved: every waiter may have given up

    async def _lookup_remote(self, q: Question) -> tuple[Any, float]:
        seq = self._cache.sequence()
        ans = await self._call(self._lookup_call(q))
        fetched = time.time()
        self._cache.store(q, ans if isinstance(ans, dict) else {}, fetched, seq)
        return ans, fetched

    async def invoke(
        self,
        capability: str,
        payload: Any,
        *,
        hint: str | None = None,
        namespace: str | None = None,
        constraints: Mapping[str, Any] | None = None,
        limit: int | None = None,
        no_cache: bool = False,
        timeout: float | None = None,
        traceparent: str | None = None,
        hedge: float | None = None,
    ) -> InvokeResult:
        """See :meth:`Client.invoke`; ``timeout`` bounds each candidate's whole call, and the calls still
        running when one answers a result (``hedge``) are cancelled."""
        body = encode_payload(payload)
        cons = http_constraints(constraints)
        res = await self.lookup(capability, hint=hint, namespace=namespace, constraints=cons, limit=limit,
                                no_cache=no_cache)
        inv = Invocation(capability, body, res, timeout, traceparent, self._memory, self._candidate_timeout)
        cands = list(inv.candidates())
        running: set[asyncio.Task[Callable[[], None]]] = set()
        started = 0

        def start() -> None:
            nonlocal started
            started += 1
            running.add(asyncio.ensure_future(self._call_agent(inv, cands[started - 1], started)))

        try:
            if cands:
                start()
            while running:
                more = hedge if hedge and started < len(cands) else None
                done, _ = await asyncio.wait(running, timeout=more, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    start()
                    continue
                for t in done:
                    running.discard(t)
                    t.result()()
                    if self._queue_report(inv) and self._kick is not None:
                        self._kick.set()
                    out = inv.outcome()
                    if out is not None:
                        return out
                if not running and started < len(cands):
                    start()
        finally:
            for t in running:
                t.cancel()
            if len(self._reports):
                self._start_reporter()
        raise inv.error()

    async def _call_agent(self, inv: Invocation, cand: Candidate, attempt: int) -> Callable[[], None]:
        """Calls ``cand``; answers how to record what happened in ``inv``."""
        content, headers = inv.request(cand, attempt)
        started = time.monotonic()

        async def call() -> tuple[int, bytes]:
            async with self._agents.stream("POST", cand.endpoint, content=content, headers=headers,
                                           timeout=inv.timeout) as resp:
                out = bytearray()
                async for chunk in resp.aiter_bytes():
                    out += chunk
                    if len(out) > MAX_AGENT_ANSWER:
                        raise AnswerTooLarge(f"answered more than {MAX_AGENT_ANSWER >> 20} MiB")
                return resp.status_code, bytes(out)

        try:
            status, raw = await asyncio.wait_for(call(), inv.timeout)
            latency = time.monotonic() - started
            return lambda: inv.answered(cand, status, raw, latency)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            why = f"no answer within {inv.timeout:g} s"
        except (httpx.HTTPError, httpx.InvalidURL, AnswerTooLarge) as e:
            why = f"{type(e).__name__}: {e}".rstrip(": ")
        latency = time.monotonic() - started
        return lambda: inv.failed(cand, why, latency)

    def report(self, *reports: DirectReport) -> None:
        """See :meth:`Client.report`; without a running loop they wait for :meth:`flush` or close."""
        if self._reports.add(reports) and self._kick is not None:
            self._kick.set()
        if len(self._reports):
            self._start_reporter()

    async def flush(self) -> None:
        """See :meth:`Client.flush`."""
        async with self._send_lock:
            while True:
                batch = self._reports.take()
                if not batch:
                    return
                try:
                    while True:
                        try:
                            await self._call(Call("POST", "/v1/reports", json=report_body(batch),
                                                  bearer=self._key))
                            break
                        except InvalidArgument as e:
                            i = refused_index(e, len(batch))
                            if i is None:
                                raise
                            log.warning("agentreach: the report on %s was refused (%s); dropped",
                                        batch[i].agent_id, e.message)
                            batch = batch[:i] + batch[i + 1:]
                            if not batch:
                                break
                except BaseException as e:  # a cancelled send keeps its batch too
                    if not isinstance(e, AgentReachError) or keep_for_later(e):
                        self._reports.requeue(batch)
                    raise

    def _start_reporter(self) -> None:
        if self._reporter is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._kick = asyncio.Event()
        self._reporter = loop.create_task(self._report_loop(), name="agentreach-reports")

    async def _report_loop(self) -> None:
        assert self._kick is not None
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self._report_interval)
            self._kick.clear()
            try:
                await self.flush()
            except AgentReachError as e:
                log.warning("agentreach: reports not sent: %s", e)

    def watch(self) -> None:
        """See :meth:`Client.watch`; the feed runs as a task of the running loop (called from
        within it) until the client is closed."""
        if self._closed or self._watcher is not None:
            return
        loop = asyncio.get_running_loop()
        self._watcher = loop.create_task(
            watch_feed(self._t.http, self.url, self._watch_headers(), self._cache, self._on_change),
            name="agentreach-watch")
