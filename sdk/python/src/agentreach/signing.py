"""Signature checks of what Agent-Reach sends: deliveries to agents and callbacks to callers.

Both are Standard Webhooks (``webhook-id``, ``webhook-timestamp``,
``webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">``, within
five minutes of now) and are checked with the ``standardwebhooks`` package.
A delivery is keyed with the SHA-256 of the agent's token; a callback with
the namespace's ``whsec_...`` secret (``GET /v1/callbacks/secret``). During a
rotation both carry two signatures, and either verifies.
"""

from __future__ import annotations

import binascii
import hashlib
import json
from typing import Any, Iterable, Mapping

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from .errors import SignatureError
from .models import CallbackEvent

__all__ = ["delivery_key", "verify_delivery", "verify_callback"]


def delivery_key(token: str) -> bytes:
    """The key deliveries to the agent holding ``token`` are signed with: SHA-256 of the token."""
    return hashlib.sha256(token.encode()).digest()


def _verify(keys: Iterable[bytes | str], body: bytes | str, headers: Mapping[str, str]) -> None:
    plain = {k.lower(): v for k, v in headers.items()}
    data = body if isinstance(body, str) else body.decode("utf-8", errors="strict")
    last = "no key to verify with"
    for key in keys:
        try:
            Webhook(key).verify(data, plain, json_parse=False)
            return
        except (WebhookVerificationError, ValueError, binascii.Error) as e:
            # ValueError and binascii.Error: a malformed signature list.
            last = str(e) or type(e).__name__
    raise SignatureError(f"signature does not verify: {last}")


def verify_delivery(token: str, body: bytes | str, headers: Mapping[str, str]) -> None:
    """Checks that a delivery (or a cancel notice) was signed for the agent holding ``token``.

    Raises :class:`~agentreach.errors.SignatureError` when it was not, when a
    header is missing, or when its timestamp is more than five minutes off.
    """
    if not token:
        raise SignatureError("signature does not verify: the agent is not registered yet")
    try:
        _verify([delivery_key(token)], body, headers)
    except UnicodeDecodeError as e:
        raise SignatureError("signature does not verify: the body is not UTF-8") from e


def verify_callback(
    secret: str | Iterable[str],
    body: bytes | str,
    headers: Mapping[str, str],
) -> CallbackEvent:
    """Verifies a callback and answers what it says.

    ``secret`` is the namespace's ``whsec_...`` callback secret, or several
    (the current and the previous one around a rotation). Raises
    :class:`~agentreach.errors.SignatureError` when no secret verifies it.
    """
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets or not all(secrets):
        raise SignatureError("signature does not verify: no callback secret given")
    try:
        _verify(secrets, body, headers)
        parsed: Any = json.loads(body)
    except UnicodeDecodeError as e:
        raise SignatureError("signature does not verify: the body is not UTF-8") from e
    except json.JSONDecodeError as e:
        raise SignatureError("the callback body is not JSON") from e
    if not isinstance(parsed, dict):
        raise SignatureError("the callback body is not a JSON object")
    wid = {k.lower(): v for k, v in headers.items()}.get("webhook-id", "")
    return CallbackEvent.from_json(parsed, webhook_id=wid)
