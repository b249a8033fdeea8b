"""Fixtures: the real Agent-Reach service, built once, with a fresh database per test module.

``AGENTREACH_BIN`` names a built binary to use instead of building one;
``PGTEST_ADMIN_URL`` the PostgreSQL server (default postgres on
127.0.0.1:5432, no password). Every address a test uses is on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from agentreach import Agent, Worker

REPO = Path(__file__).resolve().parents[3]
BUILD = REPO / "build"
LOGS = BUILD / "py-test-logs"
ADMIN_URL = os.environ.get("PGTEST_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")

# The service's pool: small, since the PostgreSQL server is shared; at 4
# River's start-up starves and /readyz never answers.
MAX_CONNS = os.environ.get("PYTEST_AGENTREACH_MAX_CONNS", "6")

T = TypeVar("T")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not found:
        pytest.fail("go is not on PATH: the tests build the service with it (or set AGENTREACH_BIN)")
    return found


@pytest.fixture(scope="session")
def agentreach_bin() -> Path:
    """The service's binary, built once for the session."""
    given = os.environ.get("AGENTREACH_BIN")
    if given:
        return Path(given).resolve()
    out = BUILD / "agentreach-pytest"
    BUILD.mkdir(exist_ok=True)
    subprocess.run([_go(), "build", "-o", str(out), "./cmd/agentreach"], cwd=REPO, check=True)
    return out


def _db_url(name: str) -> str:
    parts = urlsplit(ADMIN_URL)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _psql(sql: str) -> None:
    subprocess.run(["psql", ADMIN_URL, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], check=True,
                   stdout=subprocess.DEVNULL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(cond: Callable[[], T], timeout: float = 15.0, what: str = "the condition") -> T:
    """Polls ``cond`` until it answers something truthy, within ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


async def await_until(cond: Callable[[], Any], timeout: float = 15.0, what: str = "the condition") -> Any:
    """The asyncio twin of :func:`wait_until`; ``cond`` may be a coroutine function."""
    end = time.monotonic() + timeout
    while True:
        got = cond()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


@dataclass
class Service:
    """One running service on its own database."""

    url: str
    db: str
    proc: subprocess.Popen[bytes]
    log: Path
    admin_key: str | None = None
    args: list[str] = field(default_factory=list)

    def api(self) -> httpx.Client:
        """A raw HTTP client with the admin key, for what the SDK does not wrap."""
        headers = {"Authorization": f"Bearer {self.admin_key}"} if self.admin_key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def agent(self, agent_id: str) -> dict[str, Any]:
        with self.api() as c:
            r = c.get(f"/v1/agents/{agent_id}")
            r.raise_for_status()
            out: dict[str, Any] = r.json()
            return out

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def start_service(binary: Path, *, admin_key: str | None = None, extra: list[str] | None = None) -> Service:
    db = "agentreach_py_" + uuid.uuid4().hex[:12]
    _psql(f'CREATE DATABASE "{db}"')
    port = free_port()
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{db}.log"
    args = [
        str(binary), "serve", "--addr", f"127.0.0.1:{port}", "--database-url", _db_url(db),
        "--max-conns", MAX_CONNS, "--deadline-sweep-interval", "200ms", "--lost-after", "2s",
        "--claim-timeout", "3s", "--log-level", "warn", *(extra or []),
    ]
    args += ["--admin-key", admin_key] if admin_key else ["--insecure"]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    svc = Service(f"http://127.0.0.1:{port}", db, proc, log, admin_key, args)
    end = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            tail = svc.log_tail()
            stop_service(svc)
            raise RuntimeError(f"the service exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(svc.url + "/readyz", timeout=2).status_code == 200:
                return svc
        except httpx.HTTPError:
            pass
        if time.monotonic() > end:
            tail = svc.log_tail()
            stop_service(svc)
            raise RuntimeError(f"the service was not ready within 60 s:\n{tail}")
        time.sleep(0.05)


def stop_service(svc: Service) -> None:
    if svc.proc.poll() is None:
        svc.proc.terminate()
        try:
            svc.proc.wait(10)
        except subprocess.TimeoutExpired:
            svc.proc.kill()
            svc.proc.wait(5)
    with contextlib.suppress(subprocess.CalledProcessError):
        _psql(f'DROP DATABASE IF EXISTS "{svc.db}" WITH (FORCE)')
    with contextlib.suppress(OSError):
        svc.log.unlink()


@pytest.fixture(scope="module")
def service(agentreach_bin: Path) -> Iterator[Service]:
    """The service with authentication off, on a fresh database for this module."""
    svc = start_service(agentreach_bin)
    try:
        yield svc
    finally:
        stop_service(svc)


@pytest.fixture(scope="module")
def secure_service(agentreach_bin: Path) -> Iterator[Service]:
    """The service with an admin key (authentication on), on a fresh database."""
    svc = start_service(agentreach_bin, admin_key="ark_" + secrets.token_hex(24))
    try:
        yield svc
    finally:
        stop_service(svc)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextlib.asynccontextmanager
async def serving(agent: Agent, timeout: float = 15.0) -> AsyncIterator[Agent]:
    """Runs a push agent on a free port of 127.0.0.1 until the block ends; yields once it is registered."""
    task = asyncio.create_task(agent.serve("127.0.0.1", 0))
    try:
        await await_until(lambda: agent.registered or task.done(), timeout, f"{agent.agent_id} to register")
        if task.done():
            task.result()
        yield agent
    finally:
        agent.request_stop()
        await asyncio.wait_for(task, 30)


@contextlib.asynccontextmanager
async def working(worker: Worker, timeout: float = 15.0) -> AsyncIterator[Worker]:
    """Runs a pull worker until the block ends; yields once it is registered."""
    task = asyncio.create_task(worker.serve())
    try:
        await await_until(lambda: worker.registered or task.done(), timeout, f"{worker.agent_id} to register")
        if task.done():
            task.result()
        yield worker
    finally:
        worker.request_stop()
        await asyncio.wait_for(task, 30)


async def healthy(svc: Service, agent_id: str, timeout: float = 15.0) -> None:
    """Waits until the registry routes to the agent."""
    async with httpx.AsyncClient(base_url=svc.url, timeout=5,
                                 headers={"Authorization": f"Bearer {svc.admin_key}"} if svc.admin_key else {}) as c:
        async def ok() -> bool:
            r = await c.get(f"/v1/agents/{agent_id}")
            return r.status_code == 200 and r.json().get("state") == "HEALTHY"

        await await_until(ok, timeout, f"{agent_id} to be HEALTHY")


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign_grant(tokens: list[str], *, ns: str = "default", agent: str, cap: str, key: str = "k",
               iat: int | None = None, exp: int | None = None) -> str:
    """An invocation grant as the service signs it (domain.SignGrant), written independently of the SDK."""
    now = int(time.time())
    doc = {"ns": ns, "agent": agent, "cap": cap, "key": key, "iat": now if iat is None else iat,
           "exp": now + 300 if exp is None else exp}
    signed = "v1." + _b64(json.dumps(doc, separators=(",", ":")).encode())
    sigs = [_b64(hmac.new(hashlib.sha256(t.encode()).digest(), signed.encode(), hashlib.sha256).digest())
            for t in tokens]
    return ".".join([signed, *sigs])
