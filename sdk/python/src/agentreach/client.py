"""The caller's side: submit jobs by capability, follow them, cancel and replay them.

:class:`Client` is synchronous, :class:`AsyncClient` the same with ``await``.
Both take the service's URL and an API key (defaults: ``AGENTREACH_URL``,
``AGENTREACH_KEY``) and raise the typed errors of :mod:`agentreach.errors`.
"""

from __future__ import annotations

import asyncio
import builtins
import time
import uuid
from typing import Any, AsyncIterator, Iterator, Mapping
from urllib.parse import quote

import httpx

from ._transport import AsyncTransport, Call, SyncTransport, env_key, env_url
from .errors import WaitTimeout
from .models import Job, JobEvent, JobPage, JobSummary, Submitted

__all__ = ["Client", "AsyncClient"]


def _job_path(job_id: str, tail: str = "") -> str:
    return "/v1/jobs/" + quote(job_id, safe="") + tail


def _submit_call(
    key: str | None,
    capability: str,
    payload: Any,
    idempotency_key: str | None,
    options: Mapping[str, Any],
) -> Call:
    body: dict[str, Any] = {"capability": capability, "payload": payload}
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


def _poll_waits(first: float, most: float) -> Iterator[float]:
    wait = first
    while True:
        yield wait
        wait = min(wait * 1.5, most)


class _Options:
    """What both clients hold: where the service is and which key to send."""

    def __init__(self, url: str | None, api_key: str | None, namespace: str | None) -> None:
        self.url = env_url(url)
        self._key = env_key(api_key)
        self.namespace = namespace

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(url={self.url!r}, namespace={self.namespace!r})"

    def _opts(self, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("namespace") is None and self.namespace:
            options["namespace"] = self.namespace
        return options


class Client(_Options):
    """A synchronous caller of Agent-Reach.

    >>> with Client("http://127.0.0.1:8080", api_key="ark_...") as c:
    ...     job = c.run("document:parse:ocr", {"url": "x.pdf"}, timeout=30)

    Args:
        url: the service's base URL (default ``AGENTREACH_URL``, else http://127.0.0.1:8080).
        api_key: a key with the scopes the calls need (default ``AGENTREACH_KEY``).
        namespace: the namespace submits and lists name when they name none.
        timeout: seconds for one HTTP request.
        max_retries: how often a call that can safely be repeated is tried again.
        http: an ``httpx.Client`` to use instead of the client's own.
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
    ) -> None:
        super().__init__(url, api_key, namespace)
        self._t = SyncTransport(self.url, timeout=timeout, max_retries=max_retries, http=http)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections (not an ``http`` client passed in)."""
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
    ) -> Submitted:
        """Submits a job; answers once it is committed (``SUBMITTED``).

        The same ``idempotency_key`` with the same body answers the same job
        for 24 hours (with another body: :class:`~agentreach.errors.Conflict`).
        Without one a fresh key is made, so the SDK's own retries never
        submit twice.
        """
        opts = self._opts(dict(namespace=namespace, hint=hint, priority=priority, timeout_ms=timeout_ms,
                               max_attempts=max_attempts, callback_url=callback_url, parent_job_id=parent_job_id,
                               constraints=dict(constraints) if constraints else None, retry_on_failed=retry_on_failed,
                               backoff_base_ms=backoff_base_ms, backoff_max_ms=backoff_max_ms,
                               route_wait_ms=route_wait_ms))
        return Submitted.from_json(self._call(_submit_call(self._key, capability, payload, idempotency_key, opts)))

    def get(self, job_id: str) -> Job:
        """The job now. Raises :class:`~agentreach.errors.NotFound` for an unknown id."""
        return Job.from_json(self._call(Call("GET", _job_path(job_id), bearer=self._key, idempotent=True)))

    def wait(self, job_id: str, *, timeout: float | None = 60.0, poll: float = 0.1, max_poll: float = 1.0) -> Job:
        """Polls until the job is terminal and answers it.

        Raises :class:`~agentreach.errors.WaitTimeout` (holding the job as
        last seen) when ``timeout`` seconds pass first; ``None`` waits for ever.
        """
        end = None if timeout is None else time.monotonic() + timeout
        for wait in _poll_waits(poll, max_poll):
            job = self.get(job_id)
            if job.terminal:
                return job
            if end is not None:
                left = end - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(f"job {job_id} is still {job.status} after {timeout} s", job)
                wait = min(wait, left)
            time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def run(self, capability: str, payload: Any, *, timeout: float | None = 60.0, **submit: Any) -> Job:
        """Submits a job and waits for its end: :meth:`submit` then :meth:`wait`."""
        return self.wait(self.submit(capability, payload, **submit).job_id, timeout=timeout)

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


def _secrets(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return []
    out = [s for s in body.get("secrets") or [] if isinstance(s, str)]
    if not out and isinstance(body.get("secret"), str):
        out = [body["secret"]]
    return out


class AsyncClient(_Options):
    """The asyncio twin of :class:`Client`: the same methods, awaited."""

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        namespace: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(url, api_key, namespace)
        self._t = AsyncTransport(self.url, timeout=timeout, max_retries=max_retries, http=http)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the connections (not an ``http`` client passed in)."""
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
    ) -> Submitted:
        """See :meth:`Client.submit`."""
        opts = self._opts(dict(namespace=namespace, hint=hint, priority=priority, timeout_ms=timeout_ms,
                               max_attempts=max_attempts, callback_url=callback_url, parent_job_id=parent_job_id,
                               constraints=dict(constraints) if constraints else None, retry_on_failed=retry_on_failed,
                               backoff_base_ms=backoff_base_ms, backoff_max_ms=backoff_max_ms,
                               route_wait_ms=route_wait_ms))
        return Submitted.from_json(await self._call(_submit_call(self._key, capability, payload, idempotency_key, opts)))

    async def get(self, job_id: str) -> Job:
        """See :meth:`Client.get`."""
        return Job.from_json(await self._call(Call("GET", _job_path(job_id), bearer=self._key, idempotent=True)))

    async def wait(self, job_id: str, *, timeout: float | None = 60.0, poll: float = 0.1, max_poll: float = 1.0) -> Job:
        """See :meth:`Client.wait`."""
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        for wait in _poll_waits(poll, max_poll):
            job = await self.get(job_id)
            if job.terminal:
                return job
            if end is not None:
                left = end - loop.time()
                if left <= 0:
                    raise WaitTimeout(f"job {job_id} is still {job.status} after {timeout} s", job)
                wait = min(wait, left)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(self, capability: str, payload: Any, *, timeout: float | None = 60.0, **submit: Any) -> Job:
        """See :meth:`Client.run`."""
        return await self.wait((await self.submit(capability, payload, **submit)).job_id, timeout=timeout)

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
