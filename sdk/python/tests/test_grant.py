"""Invocation grants, without the service: what verify_grant takes and what it refuses."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import datetime, timezone

import pytest

from agentreach import Grant, InvalidGrant, SignatureError, verify_grant
from conftest import sign_grant


def test_a_grant_signed_for_the_agent_verifies_and_says_what_it_grants() -> None:
    now = int(time.time())
    grant = sign_grant(["art_a"], ns="team", agent="a", cap="c", key="key-1", iat=now, exp=now + 60)
    assert verify_grant("art_a", grant, "a", "c") == Grant("team", "a", "c", "key-1", now, now + 60)
    # An empty capability accepts any; a datetime or unix seconds as now.
    assert verify_grant("art_a", grant, "a", "", datetime.now(timezone.utc)).agent == "a"
    assert verify_grant("art_a", grant, "a", "c", now + 59).key_id == "key-1"


def test_a_grant_signed_for_either_token_of_a_rotation_verifies() -> None:
    grant = sign_grant(["art_old", "art_new"], agent="a", cap="c")
    assert verify_grant("art_new", grant, "a", "c").agent == "a"
    assert verify_grant(["art_new", "art_old"], sign_grant(["art_old"], agent="a", cap="c"), "a", "c").agent == "a"


def test_a_grant_expires_at_its_exp_second() -> None:
    now = int(time.time())
    grant = sign_grant(["art_a"], agent="a", cap="c", iat=now - 300, exp=now)
    with pytest.raises(InvalidGrant, match="expired"):
        verify_grant("art_a", grant, "a", "c", now)
    with pytest.raises(InvalidGrant, match="expired"):
        verify_grant("art_a", grant, "a", "c")  # now by default
    assert verify_grant("art_a", grant, "a", "c", now - 0.5).expires == now


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def signed_raw(doc: bytes, token: str = "art_a") -> str:
    """Correctly signed, but not a grant the service writes."""
    body = "v1." + base64.urlsafe_b64encode(doc).rstrip(b"=").decode()
    mac = hmac.new(hashlib.sha256(token.encode()).digest(), body.encode(), hashlib.sha256).digest()
    return body + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


@pytest.mark.parametrize("case", ["another agent's token", "another agent", "another capability", "no token",
                                  "garbage", "v2", "no signature", "tampered payload", "padded signature",
                                  "payload not an object", "exp not a number"])
def test_a_grant_that_does_not_hold_is_refused(case: str) -> None:
    good = sign_grant(["art_a"], agent="a", cap="c")
    head, payload, sig = good.split(".")
    token, grant, agent, cap = "art_a", good, "a", "c"
    want = "not signed for this agent"
    if case == "another agent's token":
        token = "art_b"
    elif case == "another agent":
        agent, want = "b", "for agent a"
    elif case == "another capability":
        cap, want = "d", "for capability c"
    elif case == "no token":
        token = ""
    elif case == "garbage":
        grant, want = "nope", "not a v1 grant"
    elif case == "v2":
        grant, want = "v2." + payload + "." + sig, "not a v1 grant"
    elif case == "no signature":
        grant, want = head + "." + payload, "not a v1 grant"
    elif case == "tampered payload":
        grant = head + "." + _b64(b'{"agent":"a","cap":"c","exp":9999999999}') + "." + sig
    elif case == "padded signature":
        grant = good + "="
    elif case == "payload not an object":
        grant, want = signed_raw(b"[1]"), "unreadable"
    elif case == "exp not a number":
        grant, want = signed_raw(b'{"agent":"a","cap":"c","exp":"tomorrow"}'), "unreadable"
    with pytest.raises(InvalidGrant, match=want) as err:
        verify_grant(token, grant, agent, cap)
    assert isinstance(err.value, SignatureError)
    assert "art_" not in str(err.value)  # never the token
