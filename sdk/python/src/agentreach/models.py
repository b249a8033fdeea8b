"""The values the API speaks, as typed, immutable dataclasses.

Each has ``from_json`` (what the service answers) and keeps the decoded
answer in ``raw``, so a field the service adds later is never lost.
JSON values (payloads, results) are ``Any``: they are whatever the caller and
the agent agreed on.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Mapping

__all__ = [
    "TERMINAL_STATUSES",
    "Delivery",
    "Result",
    "success",
    "failure",
    "Submitted",
    "Job",
    "JobSummary",
    "JobPage",
    "JobEvent",
    "CallbackEvent",
    "HeldAttempt",
    "parse_time",
]

#: The statuses a job never leaves.
TERMINAL_STATUSES = frozenset({"SUCCESS", "FAILED", "DEAD_LETTER", "CANCELLED", "REJECTED"})

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?$")


def parse_time(value: object) -> datetime | None:
    """Parses an RFC 3339 time as the service writes it (nanoseconds, ``Z``).

    Python 3.10's ``fromisoformat`` takes neither, so the fraction is cut to
    microseconds and ``Z`` read as UTC. ``None`` for a missing or odd value.
    """
    if not isinstance(value, str):
        return None
    m = _TIME.match(value)
    if not m:
        return None
    base, frac, tz = m.groups()
    # Python 3.10 takes exactly 3 or 6 digits; Go writes 1 to 9.
    micros = "." + (frac[1:] + "000000")[:6] if frac else ""
    text = base + micros + ("+00:00" if tz in (None, "Z") else tz)
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _str(m: Mapping[str, Any], key: str) -> str:
    v = m.get(key)
    return v if isinstance(v, str) else ""


def _opt_str(m: Mapping[str, Any], key: str) -> str | None:
    v = m.get(key)
    return v if isinstance(v, str) and v else None


def _int(m: Mapping[str, Any], key: str) -> int:
    v = m.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


@dataclass(frozen=True)
class Delivery:
    """One attempt of a job, as pushed to an agent or claimed by a pull agent.

    ``traceparent`` is the W3C trace context the delivery came with (push);
    the SDK sends it back with the result so the job's trace stays whole.
    ``direct``: a caller called the agent itself, with an invocation grant
    from a lookup, and not Agent-Reach; it is answered inline (no
    ``result_url``) and is no job of the service's.
    """

    job_id: str
    attempt: int
    trace_id: str
    capability: str
    payload: Any
    deadline: datetime | None
    result_url: str
    traceparent: str | None = None
    direct: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, m: Mapping[str, Any], traceparent: str | None = None, direct: bool = False) -> Delivery:
        """Reads an envelope; raises ``ValueError`` if it lacks a job id or attempt."""
        job_id, attempt = _str(m, "job_id"), _int(m, "attempt")
        if not job_id or attempt < 1:
            raise ValueError("a delivery needs job_id and attempt")
        return cls(
            job_id=job_id,
            attempt=attempt,
            trace_id=_str(m, "trace_id"),
            capability=_str(m, "capability"),
            payload=m.get("payload"),
            deadline=parse_time(m.get("deadline")),
            result_url=_str(m, "result_url"),
            traceparent=traceparent or None,
            direct=direct,
            raw=dict(m),
        )

    def trace_header(self) -> str | None:
        """The ``traceparent`` to send with this attempt's result.

        The one the delivery came with or, for a claimed delivery (which has
        none), one built from the job's trace id with a fresh span id.
        """
        if self.traceparent:
            return self.traceparent
        tid = self.trace_id
        if len(tid) == 32 and all(c in "0123456789abcdef" for c in tid) and tid.strip("0"):
            return f"00-{tid}-{secrets.token_hex(8)}-01"
        return None


@dataclass(frozen=True)
class Result:
    """The outcome of an attempt: SUCCESS with a result, or FAILED with a biz_code.

    FAILED is a business failure (the work ran and could not be done); it is
    not retried unless the job asked for ``retry_on_failed``. Raise an
    exception instead to say the attempt did not happen (it is retried).
    """

    status: Literal["SUCCESS", "FAILED"]
    result: Any = None
    biz_code: str | None = None

    def to_json(self, attempt: int | None = None) -> dict[str, Any]:
        """The body of an inline answer or, with ``attempt``, of a report."""
        out: dict[str, Any] = {"status": self.status}
        if self.result is not None:
            out["result"] = self.result
        if self.biz_code:
            out["biz_code"] = self.biz_code
        if attempt is not None:
            out["attempt"] = attempt
        return out


def success(result: Any = None) -> Result:
    """A SUCCESS result."""
    return Result("SUCCESS", result)


def failure(biz_code: str, detail: Any = None) -> Result:
    """A FAILED result: a business failure with its code, and an optional detail."""
    return Result("FAILED", detail, biz_code)


@dataclass(frozen=True)
class Submitted:
    """The answer to a submit or a replay: the job's id, status and trace id."""

    job_id: str
    status: str
    trace_id: str
    replay_of: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, m: Mapping[str, Any]) -> Submitted:
        """Reads the answer of ``POST /v1/jobs`` or ``/replay``."""
        return cls(_str(m, "job_id"), _str(m, "status"), _str(m, "trace_id"), _opt_str(m, "replay_of"), dict(m))


@dataclass(frozen=True)
class Job:
    """A job as ``GET /v1/jobs/{id}`` answers it (folded from its events, never stale)."""

    job_id: str
    namespace: str
    status: str
    capability: str
    attempts: int
    max_attempts: int
    trace_id: str
    agent_id: str | None = None
    result: Any = None
    biz_code: str | None = None
    error: str | None = None
    priority: str | None = None
    parent_job_id: str | None = None
    root_job_id: str | None = None
    replay_of: str | None = None
    submitted_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        """Whether the job is in a state it never leaves."""
        return self.status in TERMINAL_STATUSES

    @property
    def succeeded(self) -> bool:
        """Whether the job ended in SUCCESS."""
        return self.status == "SUCCESS"

    @classmethod
    def from_json(cls, m: Mapping[str, Any]) -> Job:
        """Reads a job."""
        return cls(
            job_id=_str(m, "job_id"),
            namespace=_str(m, "namespace"),
            status=_str(m, "status"),
            capability=_str(m, "capability"),
            attempts=_int(m, "attempts"),
            max_attempts=_int(m, "max_attempts"),
            trace_id=_str(m, "trace_id"),
            agent_id=_opt_str(m, "agent_id"),
            result=m.get("result"),
            biz_code=_opt_str(m, "biz_code"),
            error=_opt_str(m, "error"),
            priority=_opt_str(m, "priority"),
            parent_job_id=_opt_str(m, "parent_job_id"),
            root_job_id=_opt_str(m, "root_job_id"),
            replay_of=_opt_str(m, "replay_of"),
            submitted_at=parse_time(m.get("submitted_at")),
            updated_at=parse_time(m.get("updated_at")),
            finished_at=parse_time(m.get("finished_at")),
            raw=dict(m),
        )


@dataclass(frozen=True)
class JobSummary:
    """A job as a list shows it (no result: get the job for that)."""

    job_id: str
    namespace: str
    status: str
    capability: str
    attempts: int
    agent_id: str | None = None
    biz_code: str | None = None
    error: str | None = None
    submitted_at: datetime | None = None
    finished_at: datetime | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        """Whether the job is in a state it never leaves."""
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_json(cls, m: Mapping[str, Any]) -> JobSummary:
        """Reads one row of ``GET /v1/jobs``."""
        return cls(
            job_id=_str(m, "job_id"),
            namespace=_str(m, "namespace"),
            status=_str(m, "status"),
            capability=_str(m, "capability"),
            attempts=_int(m, "attempts"),
            agent_id=_opt_str(m, "agent_id"),
            biz_code=_opt_str(m, "biz_code"),
            error=_opt_str(m, "error"),
            submitted_at=parse_time(m.get("submitted_at")),
            finished_at=parse_time(m.get("finished_at")),
            raw=dict(m),
        )


@dataclass(frozen=True)
class JobPage:
    """One page of ``GET /v1/jobs``, newest first; ``next_cursor`` is ``None`` on the last."""

    jobs: list[JobSummary]
    next_cursor: str | None

    @classmethod
    def from_json(cls, m: Mapping[str, Any]) -> JobPage:
        """Reads a page."""
        rows = m.get("jobs")
        jobs = [JobSummary.from_json(r) for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
        return cls(jobs, _opt_str(m, "next_cursor"))


@dataclass(frozen=True)
class JobEvent:
    """One event of a job's audit trail."""

    version: int
    position: int
    type: str
    data: Any
    recorded_at: datetime | None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, m: Mapping[str, Any]) -> JobEvent:
        """Reads one event."""
        return cls(_int(m, "version"), _int(m, "position"), _str(m, "type"), m.get("data"),
                   parse_time(m.get("recorded_at")), dict(m))


@dataclass(frozen=True)
class CallbackEvent:
    """A verified callback: a job reached a terminal state."""

    job_id: str
    status: str
    attempts: int
    result: Any = None
    biz_code: str | None = None
    error: str | None = None
    agent_id: str | None = None
    trace_id: str | None = None
    finished_at: datetime | None = None
    webhook_id: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def succeeded(self) -> bool:
        """Whether the job ended in SUCCESS."""
        return self.status == "SUCCESS"

    @classmethod
    def from_json(cls, m: Mapping[str, Any], webhook_id: str = "") -> CallbackEvent:
        """Reads a callback body."""
        return cls(
            job_id=_str(m, "job_id"),
            status=_str(m, "status"),
            attempts=_int(m, "attempts"),
            result=m.get("result"),
            biz_code=_opt_str(m, "biz_code"),
            error=_opt_str(m, "error"),
            agent_id=_opt_str(m, "agent_id"),
            trace_id=_opt_str(m, "trace_id"),
            finished_at=parse_time(m.get("finished_at")),
            webhook_id=webhook_id,
            raw=dict(m),
        )


@dataclass(frozen=True)
class HeldAttempt:
    """An attempt an agent holds: a job id and its attempt number."""

    job_id: str
    attempt: int

    def to_json(self) -> dict[str, Any]:
        """The JSON the release and heartbeat routes speak."""
        return {"job_id": self.job_id, "attempt": self.attempt}
