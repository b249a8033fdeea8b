"""Pure pieces, without the service: signatures, error mapping, models."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from datetime import timezone

import httpx
import pytest

from agentreach import (
    APIError,
    Client,
    Conflict,
    Delivery,
    InvalidArgument,
    NotFound,
    NotPull,
    Overloaded,
    RateLimited,
    SignatureError,
    Unauthenticated,
    Unavailable,
    failure,
    success,
    verify_callback,
    verify_delivery,
)
from agentreach.errors import error_from_response
from agentreach.models import parse_time


def sign(key: bytes, msg_id: str, ts: int, body: bytes) -> str:
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def delivery_headers(token: str, body: bytes, ts: int | None = None, msg_id: str = "job.1") -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts),
            "webhook-signature": sign(hashlib.sha256(token.encode()).digest(), msg_id, ts, body)}


BODY = json.dumps({"job_id": "j1", "attempt": 1, "payload": {"a": 1}}).encode()


def test_a_delivery_signed_with_the_agents_token_verifies() -> None:
    verify_delivery("art_good", BODY, delivery_headers("art_good", BODY))
    # Header names are case-insensitive, as HTTP says.
    verify_delivery("art_good", BODY, {k.upper(): v for k, v in delivery_headers("art_good", BODY).items()})


@pytest.mark.parametrize("case", ["other token", "tampered body", "old", "future", "no signature", "garbled",
                                  "unregistered"])
def test_a_delivery_that_does_not_verify_is_refused(case: str) -> None:
    token, body, h = "art_good", BODY, delivery_headers("art_good", BODY)
    if case == "other token":
        h = delivery_headers("art_other", BODY)
    elif case == "tampered body":
        body = BODY.replace(b'"a": 1', b'"a": 2')
    elif case == "old":
        h = delivery_headers(token, BODY, ts=int(time.time()) - 6 * 60)
    elif case == "future":
        h = delivery_headers(token, BODY, ts=int(time.time()) + 6 * 60)
    elif case == "no signature":
        del h["webhook-signature"]
    elif case == "garbled":
        h["webhook-signature"] = "v1"
    elif case == "unregistered":
        token = ""
    with pytest.raises(SignatureError):
        verify_delivery(token, body, h)


def test_during_a_rotation_either_signature_verifies() -> None:
    old = delivery_headers("art_old", BODY)
    new = delivery_headers("art_new", BODY, ts=int(old["webhook-timestamp"]))
    both = dict(old, **{"webhook-signature": old["webhook-signature"] + " " + new["webhook-signature"]})
    verify_delivery("art_old", BODY, both)
    verify_delivery("art_new", BODY, both)


def test_a_callback_verifies_with_the_namespace_secret() -> None:
    raw = secrets.token_bytes(24)
    secret = "whsec_" + base64.b64encode(raw).decode()
    body = json.dumps({"job_id": "j1", "status": "SUCCESS", "attempts": 1, "result": {"x": 1},
                       "finished_at": "2026-01-02T03:04:05.123456789Z"}).encode()
    ts = int(time.time())
    h = {"webhook-id": "msg_j1", "webhook-timestamp": str(ts), "webhook-signature": sign(raw, "msg_j1", ts, body)}
    ev = verify_callback(secret, body, h)
    assert ev.job_id == "j1" and ev.succeeded and ev.result == {"x": 1} and ev.webhook_id == "msg_j1"
    assert ev.finished_at is not None and ev.finished_at.tzinfo == timezone.utc
    # The previous secret alongside the current one (a rotation) still verifies.
    other = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    assert verify_callback([other, secret], body, h).job_id == "j1"
    with pytest.raises(SignatureError):
        verify_callback(other, body, h)
    with pytest.raises(SignatureError):
        verify_callback(secret, body + b" ", h)


@pytest.mark.parametrize(("status", "code", "cls"), [
    (400, "invalid_argument", InvalidArgument),
    (401, "unauthenticated", Unauthenticated),
    (404, "not_found", NotFound),
    (409, "conflict", Conflict),
    (409, "not_pull", NotPull),
    (429, "rate_limited", RateLimited),
    (429, "overloaded", Overloaded),
    (503, "unavailable", Unavailable),
    (418, "some_new_code", APIError),
])
def test_an_error_answer_becomes_its_typed_exception(status: int, code: str, cls: type[APIError]) -> None:
    err = error_from_response(status, {"error": {"code": code, "message": "m", "field": "f"}}, "3")
    assert type(err) is cls
    assert (err.status, err.code, err.message, err.field, err.retry_after) == (status, code, "m", "f", 3.0)
    assert "\n" not in str(err)


def test_an_answer_that_is_not_json_still_has_a_class_and_a_message() -> None:
    err = error_from_response(502, "<html>bad gateway</html>")
    assert type(err) is APIError and "bad gateway" in err.message
    assert type(error_from_response(404, None)) is NotFound


def test_rfc3339_times_with_nanoseconds_parse_on_every_python() -> None:
    t = parse_time("2026-12-01T15:08:45.161113506Z")
    assert t is not None and t.microsecond == 161113 and t.tzinfo is not None
    assert parse_time("2026-12-01T15:08:45+02:00") is not None
    assert parse_time("yesterday") is None and parse_time(None) is None


def test_results_and_the_trace_context_of_a_report() -> None:
    assert success({"a": 1}).to_json(2) == {"status": "SUCCESS", "result": {"a": 1}, "attempt": 2}
    assert failure("bad_input", "why").to_json() == {"status": "FAILED", "result": "why", "biz_code": "bad_input"}
    pushed = Delivery.from_json({"job_id": "j", "attempt": 1, "trace_id": "a" * 32}, traceparent="00-x-y-01")
    assert pushed.trace_header() == "00-x-y-01"
    claimed = Delivery.from_json({"job_id": "j", "attempt": 1, "trace_id": "ab" * 16})
    tp = claimed.trace_header()
    assert tp is not None and tp.startswith("00-" + "ab" * 16 + "-") and len(tp) == 55
    with pytest.raises(ValueError):
        Delivery.from_json({"attempt": 1})


def test_a_401_is_never_retried_and_says_so_in_one_line() -> None:
    calls = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req)
        return httpx.Response(401, json={"error": {"code": "unauthenticated", "message": "API key missing"}})

    with Client("http://127.0.0.1:9", api_key="", http=httpx.Client(transport=httpx.MockTransport(handler))) as c:
        with pytest.raises(Unauthenticated) as e:
            c.get("j1")
    assert len(calls) == 1
    assert "AGENTREACH_KEY" in str(e.value) and "\n" not in str(e.value)

    with Client("http://127.0.0.1:9", api_key="ark_secret_value",
                http=httpx.Client(transport=httpx.MockTransport(handler))) as c:
        with pytest.raises(Unauthenticated) as e:
            c.get("j1")
    assert "refused" in str(e.value) and "ark_secret_value" not in str(e.value)
    assert "ark_secret_value" not in repr(c)


def test_a_503_is_retried_after_retry_after_and_a_submit_keeps_its_idempotency_key() -> None:
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.headers["Idempotency-Key"])
        if len(seen) < 3:
            return httpx.Response(503, headers={"Retry-After": "0"},
                                  json={"error": {"code": "unavailable", "message": "db down"}})
        return httpx.Response(202, json={"job_id": "j1", "status": "SUBMITTED", "trace_id": "t"})

    with Client("http://127.0.0.1:9", http=httpx.Client(transport=httpx.MockTransport(handler))) as c:
        sub = c.submit("cap", {"a": 1})
    assert sub.job_id == "j1" and len(seen) == 3 and len(set(seen)) == 1


def test_a_token_forgotten_before_registering_again_still_verifies_deliveries() -> None:
    from agentreach import Agent

    agent = Agent("forgetful", server_url="http://127.0.0.1:9")
    agent._token = "tok-old"
    agent._forget_token()
    assert agent._token == ""
    assert agent.signing_tokens() == ["tok-old"], "deliveries signed for the old token still verify"
