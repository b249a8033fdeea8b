"""Typed exceptions of the SDK.

Every error the service answers becomes an :class:`APIError` subclass chosen by
the stable ``code`` of its body (``{"error": {"code", "message", "field"}}``),
so callers catch what they mean (``except NotFound``) and never parse text.
"""

from __future__ import annotations

__all__ = [
    "AgentReachError",
    "APIError",
    "InvalidArgument",
    "Unauthenticated",
    "PermissionDenied",
    "NotFound",
    "Conflict",
    "NotPull",
    "PayloadTooLarge",
    "FanoutExceeded",
    "RateLimited",
    "Overloaded",
    "HeadersTooLarge",
    "Unavailable",
    "Internal",
    "TransportError",
    "SignatureError",
    "WaitTimeout",
    "error_from_response",
]


class AgentReachError(Exception):
    """Base of every exception this package raises."""


class APIError(AgentReachError):
    """An error answer of Agent-Reach, with its stable code.

    Attributes:
        status: the HTTP status.
        code: the stable machine-readable code (``not_found``, ...).
        message: the service's message for people.
        field: the request field at fault, for bad input; else ``None``.
        retry_after: seconds the service asked to wait (429, 503); else ``None``.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        retry_after: float | None = None,
        hint: str | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after
        self.hint = hint
        super().__init__(self._line())

    def _line(self) -> str:
        text = f"{self.code} ({self.status}): {self.message}"
        if self.field:
            text += f" [field {self.field}]"
        if self.hint:
            text = f"{self.hint} ({text})"
        return text.replace("\n", " ")


class InvalidArgument(APIError):
    """400 ``invalid_argument``: the request is malformed; ``field`` names what."""


class Unauthenticated(APIError):
    """401 ``unauthenticated``: the key or token is missing or not valid. Never retried."""


class PermissionDenied(APIError):
    """403 ``permission_denied``: the key lacks the scope for this call."""


class NotFound(APIError):
    """404 ``not_found``."""


class Conflict(APIError):
    """409 ``conflict``: e.g. an Idempotency-Key reused with another body."""


class NotPull(Conflict):
    """409 ``not_pull``: a claim or release by an agent registered in push mode."""


class PayloadTooLarge(APIError):
    """413 ``payload_too_large``."""


class FanoutExceeded(APIError):
    """422 ``fanout_exceeded``: too many descendants of one root job."""


class RateLimited(APIError):
    """429 ``rate_limited``; ``retry_after`` says how long to wait."""


class Overloaded(RateLimited):
    """429 ``overloaded``: the queue is at its hard limit; nothing was written."""


class HeadersTooLarge(APIError):
    """431 ``headers_too_large``."""


class Unavailable(APIError):
    """503 ``unavailable`` (e.g. the database is down); retried by the SDK."""


class Internal(APIError):
    """500 ``internal``."""


class TransportError(AgentReachError):
    """Agent-Reach could not be reached, or the connection broke."""


class SignatureError(AgentReachError):
    """A delivery or callback whose signature does not verify."""


class WaitTimeout(AgentReachError):
    """``wait()`` gave up before the job reached a terminal state.

    Attributes:
        job: the job as last seen.
    """

    def __init__(self, message: str, job: object) -> None:
        self.job = job
        super().__init__(message)


_BY_CODE: dict[str, type[APIError]] = {
    "invalid_argument": InvalidArgument,
    "unauthenticated": Unauthenticated,
    "permission_denied": PermissionDenied,
    "not_found": NotFound,
    "conflict": Conflict,
    "not_pull": NotPull,
    "payload_too_large": PayloadTooLarge,
    "fanout_exceeded": FanoutExceeded,
    "rate_limited": RateLimited,
    "overloaded": Overloaded,
    "headers_too_large": HeadersTooLarge,
    "unavailable": Unavailable,
    "internal": Internal,
}

_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidArgument,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: FanoutExceeded,
    429: RateLimited,
    431: HeadersTooLarge,
    500: Internal,
    503: Unavailable,
}

_FALLBACK_CODE = {cls: code for code, cls in _BY_CODE.items()}


def error_from_response(
    status: int,
    body: object,
    retry_after: str | None = None,
    hint: str | None = None,
) -> APIError:
    """Builds the typed exception for an error answer.

    ``body`` is the decoded JSON body (or anything else when the answer was
    not JSON, e.g. a proxy's page): the class comes from the body's code,
    else from the status.
    """
    code = ""
    message = ""
    field: str | None = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            code = str(err.get("code") or "")
            message = str(err.get("message") or "")
            f = err.get("field")
            field = str(f) if f else None
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or APIError
    if not code:
        code = _FALLBACK_CODE.get(cls, "unknown")
    if not message:
        message = body.strip()[:200] if isinstance(body, str) and body.strip() else f"HTTP {status}"
    wait: float | None = None
    if retry_after:
        try:
            wait = max(0.0, float(retry_after))
        except ValueError:
            wait = None
    return cls(status, code, message, field, wait, hint)
