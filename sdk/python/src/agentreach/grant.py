"""Invocation grants: what a caller that looked an agent up shows it on a direct call.

A caller asks ``POST /v1/lookup`` for the candidates of a capability and
calls one itself, sending the candidate's grant as ``X-Reach-Grant``. The
grant is ``v1.<base64url JSON>.<sig>[.<sig>]``: the JSON names the
namespace, the agent, the capability, the caller's key id and an expiry
(unix seconds); each signature is an HMAC-SHA256 of ``"v1.<base64url
JSON>"`` keyed with the SHA-256 of an agent token (one per token during a
rotation's overlap), so the agent checks it with what it already holds and
a grant for agent A is worthless at agent B.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from .errors import SignatureError

__all__ = ["GRANT_HEADER", "Grant", "InvalidGrant", "verify_grant"]

#: The header a direct call carries its invocation grant in.
GRANT_HEADER = "X-Reach-Grant"


class InvalidGrant(SignatureError):
    """An invocation grant that is malformed, not signed for this agent, for another
    agent or capability, or expired."""


@dataclass(frozen=True)
class Grant:
    """What an invocation grant says: the caller holding API key ``key_id`` looked up
    ``agent`` of ``namespace`` for ``capability``; good until ``expires`` (unix seconds)."""

    namespace: str
    agent: str
    capability: str
    key_id: str
    issued_at: int
    expires: int


def _b64decode(s: str) -> bytes:
    """Unpadded base64url, as Go's ``base64.RawURLEncoding`` reads it."""
    if "=" in s:
        raise ValueError("padded")
    return base64.b64decode(s + "=" * (-len(s) % 4), altchars=b"-_", validate=True)


def _unix(now: datetime | float | None) -> int:
    if now is None:
        return int(time.time())
    if isinstance(now, datetime):
        return int(now.timestamp() // 1)
    return int(now // 1)


def _field(doc: dict[str, Any], key: str, kind: type) -> Any:
    v = doc.get(key)
    if v is None:
        return kind()
    if kind is int and (not isinstance(v, int) or isinstance(v, bool)):
        raise ValueError(key)
    if kind is str and not isinstance(v, str):
        raise ValueError(key)
    return v


def verify_grant(
    token: str | Iterable[str],
    grant: str,
    agent_id: str,
    capability: str = "",
    now: datetime | float | None = None,
) -> Grant:
    """Checks an invocation grant against this agent's token, id and the capability
    called (empty: any), at ``now`` (default: the current time).

    ``token`` is the agent's token, or several (the current and the previous
    one around a re-registration): a signature by any of them counts.
    Answers what the grant says; raises :class:`InvalidGrant` (a
    :class:`~agentreach.SignatureError`) when it is malformed, not signed for
    this agent, for another agent or capability, or expired.
    """
    tokens = [token] if isinstance(token, str) else list(token)
    parts = grant.split(".")
    if len(parts) < 3 or parts[0] != "v1":
        raise InvalidGrant("invalid invocation grant: not a v1 grant")
    signed = ("v1." + parts[1]).encode()
    wants = [hmac.new(hashlib.sha256(t.encode()).digest(), signed, hashlib.sha256).digest() for t in tokens if t]
    ok = False
    for sig in parts[2:]:
        try:
            got = _b64decode(sig)
        except (ValueError, binascii.Error):
            continue
        if any(hmac.compare_digest(got, want) for want in wants):
            ok = True
    if not ok:
        raise InvalidGrant("invalid invocation grant: not signed for this agent")
    try:
        doc = json.loads(_b64decode(parts[1]))
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        g = Grant(namespace=_field(doc, "ns", str), agent=_field(doc, "agent", str),
                  capability=_field(doc, "cap", str), key_id=_field(doc, "key", str),
                  issued_at=_field(doc, "iat", int), expires=_field(doc, "exp", int))
    except (ValueError, binascii.Error, UnicodeDecodeError) as e:
        raise InvalidGrant("invalid invocation grant: unreadable") from e
    if g.agent != agent_id:
        raise InvalidGrant(f"invalid invocation grant: for agent {g.agent}")
    if capability and g.capability != capability:
        raise InvalidGrant(f"invalid invocation grant: for capability {g.capability}")
    if _unix(now) >= g.expires:
        raise InvalidGrant("invalid invocation grant: expired")
    return g
