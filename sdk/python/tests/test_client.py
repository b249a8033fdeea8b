"""The caller's side against the real service: submit with idempotency, get, wait, list, cancel,
replay, typed errors, and callbacks verified with the namespace's secret."""

from __future__ import annotations

import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from agentreach import (
    Client,
    Conflict,
    InvalidArgument,
    NotFound,
    SignatureError,
    WaitTimeout,
    verify_callback,
)
from conftest import Service, unique, wait_until

Received = tuple[dict[str, str], bytes]


@pytest.fixture
def callbacks() -> Iterator[tuple[str, queue.Queue[Received]]]:
    """A callback receiver on 127.0.0.1 that acknowledges with 204 and keeps what it got."""
    got: queue.Queue[Received] = queue.Queue()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.put(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/hook", got
    finally:
        srv.shutdown()
        srv.server_close()


def nobody(prefix: str = "nobody") -> str:
    """A capability no agent serves."""
    return unique(prefix)


def test_an_idempotency_key_makes_a_repeated_submit_the_same_job(service: Service) -> None:
    with Client(service.url) as c:
        cap, key = nobody(), unique("key")
        a = c.submit(cap, {"n": 1}, idempotency_key=key, route_wait_ms=60000)
        b = c.submit(cap, {"n": 1}, idempotency_key=key, route_wait_ms=60000)
        assert a.job_id == b.job_id and a.status == "SUBMITTED" and a.trace_id
        with pytest.raises(Conflict) as e:
            c.submit(cap, {"n": 2}, idempotency_key=key, route_wait_ms=60000)
        assert e.value.status == 409 and e.value.code == "conflict"
        # Without a key, two submits are two jobs.
        assert c.submit(cap, {"n": 1}).job_id != c.submit(cap, {"n": 1}).job_id
        c.cancel(a.job_id)


def test_errors_carry_the_services_code_message_and_field(service: Service) -> None:
    with Client(service.url) as c:
        with pytest.raises(InvalidArgument) as bad:
            c.submit(nobody(), {}, timeout_ms=1)
        assert (bad.value.code, bad.value.field, bad.value.status) == ("invalid_argument", "timeout_ms", 400)
        assert "timeout_ms" in bad.value.message
        with pytest.raises(NotFound) as missing:
            c.get("01a00000-0000-7000-8000-000000000000")
        assert missing.value.code == "not_found"


def test_get_list_events_cancel_and_wait(service: Service) -> None:
    with Client(service.url) as c:
        cap = nobody("listed")
        subs = [c.submit(cap, {"i": i}, route_wait_ms=60000) for i in range(3)]
        job = c.get(subs[0].job_id)
        assert (job.job_id, job.capability, job.status, job.terminal) == (subs[0].job_id, cap, "SUBMITTED", False)
        with pytest.raises(WaitTimeout) as slow:
            c.wait(subs[0].job_id, timeout=0.3)
        assert getattr(slow.value.job, "job_id") == subs[0].job_id
        # Newest first, page by page (lists read a projection: it may be a moment behind).
        wait_until(lambda: len(c.list(capability=cap).jobs) == 3, what="the jobs in the list")
        page = c.list(capability=cap, limit=2)
        assert [j.job_id for j in page.jobs] == [subs[2].job_id, subs[1].job_id] and page.next_cursor
        assert [j.job_id for j in c.iter_jobs(capability=cap, page_size=2)] == [s.job_id for s in reversed(subs)]
        for s in subs:
            assert c.cancel(s.job_id, reason="test over").status == "CANCELLED"
        done = c.wait(subs[0].job_id, timeout=5)
        assert done.status == "CANCELLED" and done.terminal and done.finished_at is not None
        with pytest.raises(Conflict):
            c.cancel(subs[0].job_id)
        types = [e.type for e in c.events(subs[0].job_id)]
        assert types[0] == "SUBMITTED" and types[-1] == "CANCELLED"
        wait_until(lambda: len(c.list(capability=cap, status="CANCELLED").jobs) == 3, what="three CANCELLED listed")


def test_a_dead_lettered_job_is_replayed_as_a_new_job(service: Service) -> None:
    with Client(service.url) as c:
        cap = nobody("dead")
        sub = c.submit(cap, {"x": 1}, max_attempts=1, route_wait_ms=100)
        dead = c.wait(sub.job_id, timeout=20)
        assert dead.status == "DEAD_LETTER"
        again = c.replay(sub.job_id)
        assert again.job_id != sub.job_id and again.replay_of == sub.job_id
        assert c.get(again.job_id).replay_of == sub.job_id
        c.cancel(again.job_id)


def test_a_callback_verifies_with_the_namespace_secret(
    service: Service, callbacks: tuple[str, queue.Queue[Received]]
) -> None:
    url, got = callbacks
    with Client(service.url) as c:
        sub = c.submit(nobody("called"), {"x": 1}, callback_url=url, route_wait_ms=60000)
        c.cancel(sub.job_id)
        headers, body = got.get(timeout=20)
        secrets = c.callback_secrets()
    assert secrets and all(s.startswith("whsec_") for s in secrets)
    ev = verify_callback(secrets, body, headers)
    assert (ev.job_id, ev.status, ev.trace_id) == (sub.job_id, "CANCELLED", sub.trace_id)
    assert ev.webhook_id == headers["webhook-id"] and ev.finished_at is not None
    forged = json.dumps(dict(json.loads(body), status="SUCCESS")).encode()
    with pytest.raises(SignatureError):
        verify_callback(secrets, forged, headers)
    with pytest.raises(SignatureError):
        verify_callback("whsec_" + "A" * 32, body, headers)
