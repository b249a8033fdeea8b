"""HTTP to Agent-Reach: one request shape, a sync and an async sender, one retry rule.

Retries: a request that never left (connection refused) is always tried
again; a ``429`` or ``503`` (the service wrote nothing) is tried again after
its ``Retry-After``; a broken connection after sending only when the request
is idempotent. A ``401`` is never retried: it raises at once, saying in one
line whether the credential was missing or refused. Credentials are never
logged and never part of an exception's text.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import httpx

from ._version import __version__
from .errors import APIError, TransportError, Unauthenticated, error_from_response

DEFAULT_URL = "http://127.0.0.1:8080"
USER_AGENT = f"agentreach-python/{__version__}"

_RETRY_STATUS = {429, 503}
_RETRY_STATUS_IDEMPOTENT = {502, 504}


def env_url(url: str | None) -> str:
    """The service's base URL: the one given, else ``AGENTREACH_URL``, else ``http://127.0.0.1:8080``."""
    return (url or os.environ.get("AGENTREACH_URL") or DEFAULT_URL).rstrip("/")


def env_key(key: str | None) -> str | None:
    """The API key: the one given, else ``AGENTREACH_KEY``, else none."""
    return key if key is not None else (os.environ.get("AGENTREACH_KEY") or None)


@dataclass
class Call:
    """One request: a path under the base URL (or an absolute URL), and how it may be retried.

    ``bearer`` is the credential to send (an API key or an agent token);
    ``credential`` names it for the one-line message of a 401.
    """

    method: str
    path: str
    json: Any = None
    params: Mapping[str, str | int] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer: str | None = None
    credential: str = "API key"
    idempotent: bool = False
    retries: int | None = None
    timeout: float | None = None


def _hint(call: Call) -> str:
    if not call.bearer:
        if call.credential == "API key":
            return "Agent-Reach needs an API key: set AGENTREACH_KEY or pass api_key="
        return f"no {call.credential} to send"
    return f"the {call.credential} was refused"


class _Core:
    def __init__(self, base_url: str, max_retries: int, backoff: float, max_backoff: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    def url(self, call: Call) -> str:
        if call.path.startswith(("http://", "https://")):
            return call.path
        return self.base_url + call.path

    def headers(self, call: Call) -> dict[str, str]:
        h = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if call.json is not None:
            h["Content-Type"] = "application/json"
        if call.bearer:
            h["Authorization"] = "Bearer " + call.bearer
        h.update(call.headers)
        return h

    def content(self, call: Call) -> bytes | None:
        if call.json is None:
            return None
        return json.dumps(call.json, separators=(",", ":")).encode()

    def wait_before(self, tries: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff * 6)
        base: float = min(self.backoff * (2**tries), self.max_backoff)
        return base * (0.5 + random.random() / 2)

    def outcome(self, call: Call, resp: httpx.Response) -> tuple[Any, APIError | None]:
        """Decodes a 2xx answer, or builds the error of another."""
        body: Any
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            body = resp.text
        if 200 <= resp.status_code < 300:
            return body, None
        err = error_from_response(
            resp.status_code,
            body,
            resp.headers.get("Retry-After"),
            _hint(call) if resp.status_code == 401 else None,
        )
        return None, err

    def retryable(self, call: Call, err: APIError) -> bool:
        if isinstance(err, Unauthenticated):
            return False
        return err.status in _RETRY_STATUS or (call.idempotent and err.status in _RETRY_STATUS_IDEMPOTENT)

    def limit(self, call: Call) -> int:
        return self.max_retries if call.retries is None else call.retries


def _sent(e: httpx.TransportError) -> bool:
    """Whether the request may have reached the server (so retrying may repeat it)."""
    return not isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


def _transport_error(call: Call, url: str, e: Exception) -> TransportError:
    return TransportError(f"{call.method} {url}: {type(e).__name__}: {e}".rstrip(": "))


class SyncTransport(_Core):
    """Sends calls with an ``httpx.Client``."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        http: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url, max_retries, backoff, max_backoff)
        self._own = http is None
        self.http = http or httpx.Client(timeout=timeout)

    def call(self, call: Call) -> Any:
        """Sends ``call``, retrying as the module says; answers the decoded body."""
        url = self.url(call)
        tries = 0
        while True:
            try:
                resp = self.http.request(
                    call.method, url, content=self.content(call), params=call.params,
                    headers=self.headers(call), timeout=call.timeout or httpx.USE_CLIENT_DEFAULT,
                )
            except httpx.TransportError as e:
                if tries < self.limit(call) and (call.idempotent or not _sent(e)):
                    time.sleep(self.wait_before(tries, None))
                    tries += 1
                    continue
                raise _transport_error(call, url, e) from e
            body, err = self.outcome(call, resp)
            if err is None:
                return body
            if tries < self.limit(call) and self.retryable(call, err):
                time.sleep(self.wait_before(tries, err.retry_after))
                tries += 1
                continue
            raise err

    def close(self) -> None:
        """Closes the HTTP client if this transport made it."""
        if self._own:
            self.http.close()


class AsyncTransport(_Core):
    """Sends calls with an ``httpx.AsyncClient``."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(base_url, max_retries, backoff, max_backoff)
        self._own = http is None
        self.http = http or httpx.AsyncClient(timeout=timeout)

    async def call(self, call: Call) -> Any:
        """Sends ``call``, retrying as the module says; answers the decoded body."""
        url = self.url(call)
        tries = 0
        while True:
            try:
                resp = await self.http.request(
                    call.method, url, content=self.content(call), params=call.params,
                    headers=self.headers(call), timeout=call.timeout or httpx.USE_CLIENT_DEFAULT,
                )
            except httpx.TransportError as e:
                if tries < self.limit(call) and (call.idempotent or not _sent(e)):
                    await asyncio.sleep(self.wait_before(tries, None))
                    tries += 1
                    continue
                raise _transport_error(call, url, e) from e
            body, err = self.outcome(call, resp)
            if err is None:
                return body
            if tries < self.limit(call) and self.retryable(call, err):
                await asyncio.sleep(self.wait_before(tries, err.retry_after))
                tries += 1
                continue
            raise err

    async def aclose(self) -> None:
        """Closes the HTTP client if this transport made it."""
        if self._own:
            await self.http.aclose()
