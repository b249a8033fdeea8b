"""Lookup mode, the caller's side: candidates and their cache, direct calls, outcome reports, the watch feed.

A caller asks ``POST /v1/lookup`` for the ranked candidates of a
capability (each with an invocation grant), calls the best one itself and
reports what happened (``POST /v1/reports``), so the agents' health figures
count direct calls too. :class:`~agentreach.Client` and
:class:`~agentreach.AsyncClient` do it with ``lookup``, ``invoke``,
``report``, ``flush`` and ``watch``; this module holds what both share, and
mirrors the Go client (``sdk/client``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import secrets
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import httpx

from .errors import AgentReachError, APIError, InvalidArgument, RateLimited, TransportError, error_from_response
from .grant import GRANT_HEADER
from .models import parse_time

__all__ = [
    "Candidate",
    "LookupResult",
    "Attempt",
    "InvokeResult",
    "AgentChange",
    "DirectReport",
    "NoCandidates",
]

log = logging.getLogger("agentreach")

#: The states a cached candidate is never served in.
NOT_SERVABLE = frozenset({"SUSPECT", "DOWN", "OFFLINE", "DRAINING", "PROBING"})
#: How long before its earliest grant expires a cached answer stops being fresh,
#: so a grant served has time for its call.
GRANT_MARGIN = 10.0
#: How old a report (and the lookup of its agent) may be, a margin under the service's 10 minutes.
REPORT_WINDOW = 600.0 - 30.0
#: The service's bound on one ``POST /v1/reports``.
MAX_REPORTS_PER_BATCH = 1000
#: The largest inline answer read from an agent, as Agent-Reach's own delivery does.
MAX_AGENT_ANSWER = 16 << 20
CACHE_FILE_VERSION = 1


def _rfc3339(t: datetime | float) -> str:
    if not isinstance(t, datetime):
        t = datetime.fromtimestamp(t, timezone.utc)
    return t.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _f(m: Mapping[str, Any], key: str) -> float:
    v = m.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _s(m: Mapping[str, Any], key: str) -> str:
    v = m.get(key)
    return v if isinstance(v, str) else ""


# --- what the API speaks ----------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """An agent a lookup found: one the caller may call directly, at ``endpoint``, with ``grant``.

    ``grant`` is the invocation grant the agent checks (``X-Reach-Grant``):
    for this agent and capability, until ``grant_expires_at``. It is a
    credential, and never shown in a repr.
    """

    agent_id: str
    namespace: str
    endpoint: str
    protocol: str
    score: float
    state: str
    ttl_ms: int
    grant: str = field(repr=False)
    grant_expires_at: datetime | None
    protocol_version: str | None = None
    version: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, m: Mapping[str, Any]) -> Candidate:
        """Reads one candidate of ``POST /v1/lookup``."""
        return cls(
            agent_id=_s(m, "agent_id"), namespace=_s(m, "namespace"), endpoint=_s(m, "endpoint"),
            protocol=_s(m, "protocol"), score=_f(m, "score"), state=_s(m, "state"), ttl_ms=int(_f(m, "ttl_ms")),
            grant=_s(m, "grant"), grant_expires_at=parse_time(m.get("grant_expires_at")),
            protocol_version=_s(m, "protocol_version") or None, version=_s(m, "version") or None, raw=dict(m),
        )


@dataclass(frozen=True)
class LookupResult:
    """A lookup's answer: the candidates, best first.

    ``ttl`` is how long (seconds) the answer may still be used as fresh;
    ``cached``: served from memory without asking the registry; ``stale``:
    the registry could not be reached and this is the last list known (its
    grants may have expired: an agent refuses an expired grant and
    ``invoke`` then tries the next candidate).
    """

    candidates: list[Candidate]
    ttl: float
    fetched_at: datetime
    cached: bool = False
    stale: bool = False
    watch_from: int = 0


@dataclass(frozen=True)
class Attempt:
    """One candidate's call by ``invoke``.

    ``reached``: the agent took the call and answered a result; ``status_code``
    is its HTTP status (0 without an answer); ``latency`` the round trip in
    seconds; ``error`` why it gave no result (``None`` for the one that did).
    """

    agent_id: str
    namespace: str
    endpoint: str
    reached: bool = False
    status_code: int = 0
    latency: float = 0.0
    error: str | None = None
    grant_refused: bool = False


@dataclass(frozen=True)
class InvokeResult:
    """What the agent that took a direct invocation answered.

    ``status`` is SUCCESS or FAILED (a business failure the agent answered:
    not failed over). ``invocation_id`` is the envelope's ``job_id`` (a
    UUID v7), the same for every candidate tried; ``attempts`` are the
    candidates called, in order, the answering one last.
    """

    status: str
    result: Any
    biz_code: str | None
    agent_id: str
    namespace: str
    invocation_id: str
    trace_id: str
    latency: float
    stale: bool
    attempts: list[Attempt]

    @property
    def succeeded(self) -> bool:
        """Whether the agent answered SUCCESS."""
        return self.status == "SUCCESS"


@dataclass(frozen=True)
class AgentChange:
    """One change of the registry the watch feed reports.

    ``type`` is the event's (``AGENT_REGISTERED``, ``AGENT_STATE_CHANGED``,
    ``AGENT_DEREGISTERED``, ``AGENT_UPDATED``, ...); ``state`` the agent's
    state after it, when the event says; ``position`` its place in the log.
    """

    type: str
    namespace: str
    agent_id: str
    state: str
    position: int
    recorded_at: datetime | None
    data: Any = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, m: Mapping[str, Any], event_id: str = "") -> AgentChange:
        """Reads one message of ``GET /v1/agents/watch``."""
        pos = int(_f(m, "position"))
        if not pos and event_id.isdigit():
            pos = int(event_id)
        return cls(_s(m, "type"), _s(m, "namespace"), _s(m, "agent_id"), _s(m, "state"), pos,
                   parse_time(m.get("recorded_at")), m.get("data"), dict(m))


@dataclass(frozen=True)
class DirectReport:
    """The outcome of one direct call of an agent, for its health figures (``POST /v1/reports``).

    ``reached``: the agent took the call and answered a result (a connection
    error, a timeout or a 5xx is not reached); ``ok``: that result was a
    SUCCESS. ``namespace`` is the agent's (a candidate's); empty is the key's.
    """

    agent_id: str
    capability: str
    reached: bool
    ok: bool = False
    latency_ms: float = 0.0
    biz_code: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    namespace: str = ""

    def to_json(self) -> dict[str, Any]:
        """One report of the batch body."""
        out: dict[str, Any] = {"agent_id": self.agent_id, "capability": self.capability, "reached": self.reached,
                               "ok": self.ok, "latency_ms": max(0.0, round(self.latency_ms, 3)),
                               "at": _rfc3339(self.at)}
        if self.biz_code:
            out["biz_code"] = self.biz_code
        return out


class NoCandidates(AgentReachError):
    """``invoke`` found no candidate that answered a result: every one failed (see
    ``attempts``), or the lookup found none to call directly."""

    def __init__(self, message: str, attempts: Sequence[Attempt] = ()) -> None:
        self.attempts = list(attempts)
        super().__init__(message)


def unreachable(err: BaseException) -> bool:
    """Whether ``err`` says the registry could not be reached (no answer, 502, 503, 504)."""
    return isinstance(err, TransportError) or (isinstance(err, APIError) and err.status in (502, 503, 504))


# --- lookups and their cache ------------------------------------------------


@dataclass(frozen=True)
class Question:
    """What makes two lookups the same: the body sent and its cache key."""

    capability: str
    key: str
    namespace: str
    body: dict[str, Any]


def _constraints(c: Mapping[str, Any] | None) -> dict[str, Any]:
    """The constraints in the Go client's field order, without empty ones (so cache keys match)."""
    c = c or {}
    out: dict[str, Any] = {}
    for k in ("version", "protocol", "protocol_versions"):
        v = c.get(k)
        if v:
            out[k] = list(v) if k == "protocol_versions" else v
    out.update({k: v for k, v in c.items() if k not in out and v})
    return out


def question(capability: str, hint: str | None, namespace: str | None, constraints: Mapping[str, Any] | None,
             limit: int | None) -> Question:
    """The lookup to ask, and its cache key (the Go client's, so both read one cache file)."""
    cons = _constraints(constraints)
    key: dict[str, Any] = {"c": capability}
    body: dict[str, Any] = {"capability": capability}
    if hint:
        key["h"] = body["hint"] = hint
    if namespace:
        key["n"] = body["namespace"] = namespace
    key["k"] = cons
    if cons:
        body["constraints"] = cons
    if limit:
        key["l"] = body["limit"] = limit
    return Question(capability, json.dumps(key, separators=(",", ":")), namespace or "", body)


@dataclass
class _Entry:
    key: str
    namespace: str
    fetched_at: float
    ttl_ms: int
    watch_from: int
    candidates: list[Candidate]
    fresh_until: float = 0.0  # 0: stale use only

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "namespace": self.namespace, "fetched_at": _rfc3339(self.fetched_at),
                "ttl_ms": self.ttl_ms, "watch_from": self.watch_from,
                "candidates": [dict(c.raw) for c in self.candidates]}

    def result(self, now: float, cached: bool, stale: bool) -> LookupResult:
        return LookupResult(list(self.candidates), max(0.0, self.fresh_until - now) if not stale else 0.0,
                            datetime.fromtimestamp(self.fetched_at, timezone.utc), cached, stale, self.watch_from)


def _fresh_until(e: _Entry) -> float:
    """Its TTL from when it was fetched, or any candidate's, or a grant margin before the
    first grant expires, whichever comes first."""
    until = e.fetched_at + e.ttl_ms / 1000.0
    for c in e.candidates:
        if c.ttl_ms > 0:
            until = min(until, e.fetched_at + c.ttl_ms / 1000.0)
        if c.grant_expires_at is not None:
            until = min(until, c.grant_expires_at.timestamp() - GRANT_MARGIN)
    return until


class LookupCache:
    """Lookup answers, least recently used out first; thread-safe.

    An entry is fresh until its expiry and, after that (or once the watch
    feed made it unfresh), still kept as the last known list, served only as
    stale when the registry is unreachable. With a file, every list is kept
    there too (written atomically, mode 0600: it holds grants) and read at
    start, for stale use only.
    """

    def __init__(self, size: int = 256, file: str | os.PathLike[str] | None = None) -> None:
        self.serve_fresh = size > 0
        self.size = size if size > 0 else 256
        self.file = Path(file) if file else None
        self._lock = threading.Lock()
        self._file_lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # most recent last
        self._seq = 0
        if self.file is not None:
            try:
                self._load()
            except (OSError, ValueError, TypeError, AttributeError) as e:
                log.warning("agentreach: cache file %s not read (%s); starting without it", self.file, e)

    def sequence(self) -> int:
        """Bumped by every change the watch feed applies."""
        with self._lock:
            return self._seq

    def fresh(self, key: str, now: float) -> LookupResult | None:
        """Key's answer if it is fresh at ``now``."""
        with self._lock:
            e = self._entries.get(key)
            if e is None or not self.serve_fresh or now >= e.fresh_until or not e.candidates:
                return None
            self._entries.move_to_end(key)
            return e.result(now, cached=True, stale=False)

    def stale(self, key: str) -> LookupResult | None:
        """Key's last known list, fresh or not."""
        with self._lock:
            e = self._entries.get(key)
            if e is None or not e.candidates:
                return None
            return e.result(0.0, cached=False, stale=True)

    def watch_from(self) -> int:
        """The oldest ``watch_from`` of the fresh entries; 0 with none."""
        with self._lock:
            froms = [e.watch_from for e in self._entries.values() if e.fresh_until and e.watch_from > 0]
            return min(froms) if froms else 0

    def store(self, q: Question, answer: Mapping[str, Any], fetched: float, seq: int) -> None:
        """Keeps an answer, without the candidates that must not be served from the cache.

        ``seq`` is :meth:`sequence` when the request left: if the watch feed
        changed anything since, the answer may predate that change, and is
        kept for stale use only.
        """
        if not self.serve_fresh and self.file is None:
            return
        cands = [Candidate.from_json(c) for c in answer.get("candidates") or [] if isinstance(c, dict)]
        e = _Entry(q.key, q.namespace, fetched, int(_f(answer, "ttl_ms")), int(_f(answer, "watch_from")),
                   [c for c in cands if c.state not in NOT_SERVABLE])
        e.fresh_until = _fresh_until(e)
        with self._lock:
            if self._seq != seq:
                e.fresh_until = 0.0
            if not e.candidates:  # the registry knows none now: neither do we
                self._entries.pop(q.key, None)
            else:
                self._put(e)
        self.persist()

    def _put(self, e: _Entry) -> None:
        self._entries[e.key] = e
        self._entries.move_to_end(e.key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def agent_changed(self, ch: AgentChange) -> bool:
        """Applies one change of the watch feed; answers whether it dropped a candidate.

        An agent that left HEALTHY (SUSPECT, DOWN, DRAINING, OFFLINE, PROBING
        after a restart) or deregistered is dropped from every list at once.
        Any other change (back to HEALTHY, registered, updated) may change
        the ranking or bring a new candidate, so its namespace's lists stop
        being fresh: the next lookup asks the registry, and they stay as the
        stale fallback.
        """
        drop = ch.type == "AGENT_DEREGISTERED" or (ch.state != "" and ch.state != "HEALTHY")
        dropped = False
        with self._lock:
            self._seq += 1
            for key, e in list(self._entries.items()):
                if drop:
                    keep = [c for c in e.candidates if not (
                        c.agent_id == ch.agent_id
                        and (c.namespace == ch.namespace or not c.namespace or not ch.namespace))]
                    if len(keep) < len(e.candidates):
                        dropped = True
                        e.candidates = keep
                    if not keep:
                        del self._entries[key]
                elif not e.namespace or not ch.namespace or e.namespace == ch.namespace:
                    e.fresh_until = 0.0
        return dropped

    def _load(self) -> None:
        assert self.file is not None
        try:
            doc = json.loads(self.file.read_bytes())
        except FileNotFoundError:
            return
        if not isinstance(doc, dict) or doc.get("version") != CACHE_FILE_VERSION:
            raise ValueError(f"not a version {CACHE_FILE_VERSION} cache file")
        lists = doc.get("lists") or []
        with self._lock:
            for m in reversed(lists):  # oldest first, so the file's order is kept
                if not isinstance(m, dict) or not _s(m, "key"):
                    continue
                cands = [Candidate.from_json(c) for c in m.get("candidates") or [] if isinstance(c, dict)]
                fetched = parse_time(m.get("fetched_at"))
                if cands:
                    self._put(_Entry(_s(m, "key"), _s(m, "namespace"), fetched.timestamp() if fetched else 0.0,
                                     int(_f(m, "ttl_ms")), int(_f(m, "watch_from")), cands))

    def persist(self) -> None:
        """Writes every list to the file: a temporary file in the same directory, then renamed over it."""
        if self.file is None:
            return
        with self._file_lock:
            with self._lock:
                doc = {"version": CACHE_FILE_VERSION, "written_at": _rfc3339(time.time()),
                       "lists": [e.to_json() for e in reversed(self._entries.values())]}
            try:
                fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix="." + self.file.name + ".")
                try:
                    os.fchmod(fd, 0o600)
                    with os.fdopen(fd, "wb") as out:
                        out.write(json.dumps(doc, separators=(",", ":")).encode())
                        out.flush()
                        os.fsync(out.fileno())
                    os.replace(tmp, self.file)
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
            except OSError as e:
                log.warning("agentreach: cache file %s not written: %s", self.file, e)


# --- direct calls -----------------------------------------------------------


def uuid7() -> str:
    """A UUID v7: 48 bits of unix milliseconds, then randomness (RFC 9562)."""
    ms = time.time_ns() // 1_000_000
    rand_a = secrets.randbits(12)
    rand_b = secrets.randbits(62)
    value = ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))


_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-([0-9a-f]{2})$")


def trace_of(traceparent: str | None) -> tuple[str, str]:
    """The trace id and flags of a W3C ``traceparent``, or a new trace's when it is not one."""
    m = _TRACEPARENT.match((traceparent or "").strip().lower())
    if m and m.group(1) != "0" * 32:
        return m.group(1), m.group(2)
    return secrets.token_hex(16), "01"


def http_constraints(constraints: Mapping[str, Any] | None) -> dict[str, Any]:
    """The lookup's constraints for ``invoke``: protocol http (the only one it speaks) by default."""
    cons = dict(constraints or {})
    proto = cons.get("protocol") or "http"
    if proto != "http":
        raise ValueError(f"invoke speaks http, not {proto!r}")
    cons["protocol"] = "http"
    return cons


def _shorten(b: bytes, n: int = 200) -> str:
    s = b.decode("utf-8", errors="replace").strip()
    return s[:n] + "…" if len(s) > n else s


def encode_payload(payload: Any) -> str:
    """The payload as JSON; ``ValueError`` when it is not JSON."""
    try:
        return json.dumps(payload, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"the payload is not JSON: {e}") from e


class AnswerTooLarge(Exception):
    """An agent's answer over :data:`MAX_AGENT_ANSWER`."""


class CallMemory:
    """What ``invoke`` remembers of earlier calls, so a hung or dead agent costs a caller once.

    Once ten calls of a capability answered, a candidate gets 3 x the p99 of
    the last 64 answers (at least 1 s, at most ``candidate_timeout``). A
    candidate that could not be reached or did not answer in time is tried
    after every other one for ``quarantine`` seconds. Thread-safe.
    """

    SAMPLES, MIN_SAMPLES, MIN_TIMEOUT = 64, 10, 1.0

    def __init__(self, quarantine: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.quarantine = quarantine
        self._clock = clock
        self._lock = threading.Lock()
        self._latencies: dict[str, list[float]] = {}
        self._until: dict[tuple[str, str], float] = {}

    def timeout(self, capability: str, ceiling: float) -> float:
        """How long a candidate of ``capability`` has to answer."""
        with self._lock:
            return call_timeout(self._latencies.get(capability, []), ceiling)

    def answered(self, capability: str, latency: float) -> None:
        with self._lock:
            lat = self._latencies.setdefault(capability, [])
            lat.append(latency)
            del lat[:-self.SAMPLES]

    def failed(self, cand: Candidate) -> None:
        if self.quarantine > 0:
            with self._lock:
                self._until[(cand.namespace, cand.agent_id)] = self._clock() + self.quarantine

    def order(self, cands: Sequence[Candidate]) -> list[Candidate]:
        """``cands`` with the quarantined ones last, each group in its order."""
        now = self._clock()
        with self._lock:
            for k in [k for k, until in self._until.items() if until <= now]:
                del self._until[k]
            held = {k for k in self._until}
        return ([c for c in cands if (c.namespace, c.agent_id) not in held]
                + [c for c in cands if (c.namespace, c.agent_id) in held])


def call_timeout(samples: Sequence[float], ceiling: float) -> float:
    """3 x the p99 of ``samples`` (seconds), between 1 s and ``ceiling``; ``ceiling`` until ten answered."""
    if len(samples) < CallMemory.MIN_SAMPLES:
        return ceiling
    s = sorted(samples)
    p99 = s[min(len(s) - 1, (len(s) * 99 + 99) // 100 - 1)]
    return min(max(3 * p99, CallMemory.MIN_TIMEOUT), ceiling)


class Invocation:
    """One ``invoke``: the envelope each candidate gets, what each answered, the result or the error."""

    def __init__(self, capability: str, payload_json: str, res: LookupResult, timeout: float | None,
                 traceparent: str | None, memory: CallMemory | None = None, ceiling: float = 30.0) -> None:
        self._payload = payload_json
        self.capability = capability
        self.lookup = res
        self._memory = memory or CallMemory(0)
        self.timeout = timeout or self._memory.timeout(capability, ceiling)
        self.id = uuid7()
        self.trace_id, self._flags = trace_of(traceparent)
        self.attempts: list[Attempt] = []
        self._answer: dict[str, Any] | None = None
        self.reportable = time.time() - res.fetched_at.timestamp() < REPORT_WINDOW

    def candidates(self) -> Iterator[Candidate]:
        """The candidates to try, best first (quarantined ones last): those speaking http, with an endpoint."""
        for c in self._memory.order(self.lookup.candidates):
            if (c.protocol in ("", "http")) and c.endpoint:
                yield c

    def request(self, cand: Candidate, attempt: int | None = None) -> tuple[bytes, dict[str, str]]:
        """The envelope (a brokered delivery's shape, an empty ``result_url``) and its headers; ``attempt``
        numbers it (default: after the attempts recorded)."""
        deadline = _rfc3339(time.time() + self.timeout)
        body = ('{"job_id":%s,"attempt":%d,"trace_id":%s,"capability":%s,"payload":%s,"deadline":%s,'
                '"result_url":""}') % (json.dumps(self.id), attempt or len(self.attempts) + 1, json.dumps(self.trace_id),
                                       json.dumps(self.capability), self._payload, json.dumps(deadline))
        headers = {"Content-Type": "application/json", "Accept": "application/json", GRANT_HEADER: cand.grant,
                   "X-Reach-Job-Id": self.id,
                   "traceparent": f"00-{self.trace_id}-{secrets.token_hex(8)}-{self._flags}"}
        return body.encode(), headers

    def answered(self, cand: Candidate, status: int, body: bytes, latency: float) -> None:
        """Records an agent's answer: a result when it is a 200 with SUCCESS or FAILED."""
        err: str | None = None
        refused = False
        ans: dict[str, Any] | None = None
        if status in (401, 403):
            err, refused = f"the agent refused the grant (HTTP {status}: {_shorten(body)})", True
        elif status != 200:
            err = f"answered HTTP {status}: {_shorten(body)}"
        else:
            try:
                doc = json.loads(body)
            except ValueError:
                doc = None
            if isinstance(doc, dict) and doc.get("status") in ("SUCCESS", "FAILED"):
                ans = doc
            else:
                err = f"answered 200 without a SUCCESS or FAILED result: {_shorten(body)}"
        self._answer = ans
        if ans is not None:
            self._memory.answered(self.capability, latency)
        self.attempts.append(Attempt(cand.agent_id, cand.namespace, cand.endpoint, ans is not None, status,
                                     latency, err, refused))

    def failed(self, cand: Candidate, error: str, latency: float) -> None:
        """Records a call that got no answer (a connection error, a timeout): the agent is quarantined."""
        self._answer = None
        self._memory.failed(cand)
        self.attempts.append(Attempt(cand.agent_id, cand.namespace, cand.endpoint, False, 0, latency, error))

    def report(self) -> DirectReport | None:
        """The report of the last attempt, or ``None`` when it says nothing of the agent's health
        (a refused grant) or its lookup is too old to report on."""
        att = self.attempts[-1]
        if not self.reportable or att.grant_refused:
            return None
        ans = self._answer
        biz = ans.get("biz_code") if ans else None
        return DirectReport(att.agent_id, self.capability, att.reached,
                            ok=ans is not None and ans.get("status") == "SUCCESS", latency_ms=att.latency * 1000.0,
                            biz_code=biz if isinstance(biz, str) and biz else None, namespace=att.namespace)

    def outcome(self) -> InvokeResult | None:
        """The result, when the last attempt answered one."""
        ans = self._answer
        if ans is None:
            return None
        att = self.attempts[-1]
        biz = ans.get("biz_code")
        return InvokeResult(str(ans.get("status")), ans.get("result"), biz if isinstance(biz, str) and biz else None,
                            att.agent_id, att.namespace, self.id, self.trace_id, att.latency, self.lookup.stale,
                            list(self.attempts))

    def error(self) -> NoCandidates:
        """The error once every candidate failed."""
        if not self.attempts:
            return NoCandidates(f"invoke {self.capability}: the lookup found no agent to call directly")
        why = "; ".join(f"{a.agent_id}: {a.error}" for a in self.attempts)
        return NoCandidates(f"invoke {self.capability}: no candidate answered: {why}", self.attempts)


# --- reports ----------------------------------------------------------------


_REPORT_FIELD = re.compile(r"^reports\[(\d+)\]")


class ReportQueue:
    """Reports waiting to be sent, in order; thread-safe."""

    def __init__(self, batch: int = 100, max_pending: int = 10_000) -> None:
        self.batch = min(max(batch, 1), MAX_REPORTS_PER_BATCH)
        self.max_pending = max_pending
        self._lock = threading.Lock()
        self._pending: list[DirectReport] = []
        self.closed = False

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def add(self, reports: Sequence[DirectReport]) -> bool:
        """Queues reports (dropped once closed); answers whether a batch is full."""
        with self._lock:
            if self.closed or not reports:
                return False
            self._pending.extend(reports)
            over = len(self._pending) - self.max_pending
            if over > 0:
                del self._pending[:over]
                log.warning("agentreach: too many reports pending; the %d oldest dropped", over)
            return len(self._pending) >= self.batch

    def take(self) -> list[DirectReport]:
        """The next batch: up to the service's bound of the first one's namespace, in order,
        without those too old to be taken."""
        with self._lock:
            oldest = time.time() - REPORT_WINDOW
            self._pending = [r for r in self._pending if r.at.timestamp() >= oldest]
            if not self._pending:
                return []
            ns = self._pending[0].namespace
            batch: list[DirectReport] = []
            rest: list[DirectReport] = []
            for r in self._pending:
                (batch if r.namespace == ns and len(batch) < MAX_REPORTS_PER_BATCH else rest).append(r)
            self._pending = rest
            return batch

    def requeue(self, batch: list[DirectReport]) -> None:
        """Puts a batch that could not be sent back at the front."""
        with self._lock:
            self._pending[:0] = batch


def report_body(batch: Sequence[DirectReport]) -> dict[str, Any]:
    """The body of ``POST /v1/reports`` for one batch (all of one namespace)."""
    body: dict[str, Any] = {"reports": [r.to_json() for r in batch]}
    if batch and batch[0].namespace:
        body["namespace"] = batch[0].namespace
    return body


def refused_index(err: AgentReachError, n: int) -> int | None:
    """The index of the report the service refused (``400`` naming ``reports[i]``), if it says."""
    if isinstance(err, InvalidArgument) and err.field:
        m = _REPORT_FIELD.match(err.field)
        if m and int(m.group(1)) < n:
            return int(m.group(1))
    return None


def keep_for_later(err: AgentReachError) -> bool:
    """Whether a batch that failed so should be sent again later (no answer, busy, unavailable)."""
    return unreachable(err) or isinstance(err, RateLimited)


# --- the watch feed ---------------------------------------------------------


class SSEParser:
    """Server-Sent Events, a line at a time."""

    def __init__(self) -> None:
        self.id = ""
        self.event = ""
        self.data: list[str] = []

    def feed(self, line: str) -> tuple[str, str, str] | None:
        """Takes one line; answers ``(id, event, data)`` when it ends an event."""
        if line == "":
            out = (self.id, self.event, "\n".join(self.data)) if self.data or self.id else None
            self.id, self.event, self.data = "", "", []
            return out
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            self.id = value
        elif name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        return None


@dataclass
class WatchState:
    """Where a watch feed is: the last event id read, and whether the last connection was answered."""

    last_id: str = ""
    connected: bool = False


def watch_headers(state: WatchState, cache: LookupCache, headers: Mapping[str, str]) -> dict[str, str]:
    """The feed's request headers: resuming after the last event read or, before any, from the
    oldest cached answer's ``watch_from`` (so no change since any of them is missed)."""
    h = {**headers, "Accept": "text/event-stream", "Cache-Control": "no-cache"}
    frm = state.last_id or (str(cache.watch_from()) if cache.watch_from() > 0 else "")
    if frm:
        h["Last-Event-ID"] = frm
    return h


def apply_event(ev: tuple[str, str, str], state: WatchState, cache: LookupCache,
                on_change: Callable[[AgentChange], None] | None) -> None:
    """Applies one event of the feed to the cache, and tells ``on_change``."""
    eid, kind, data = ev
    if eid:
        state.last_id = eid
    if kind not in ("agent", "") or not data:
        return
    try:
        doc = json.loads(data)
        ch = AgentChange.from_json(doc, eid) if isinstance(doc, dict) else None
    except ValueError:
        ch = None
    if ch is None or not ch.agent_id:
        log.warning("agentreach: unreadable agent change (id %s)", eid)
        return
    if cache.agent_changed(ch):
        cache.persist()  # so a start from the file does not offer it either
    if on_change is not None:
        try:
            on_change(ch)
        except Exception:
            log.exception("agentreach: on_agent_change failed")


def backoff(tries: int, base: float = 0.25, ceiling: float = 5.0) -> float:
    """``base`` doubling per try up to ``ceiling``, give or take a quarter."""
    d: float = min(base * 2.0 ** min(tries, 20), ceiling)
    return d * (0.75 + random.random() / 2)


_WATCH_TIMEOUT = httpx.Timeout(10.0, read=60.0)  # the feed sends a keepalive every 15 s


async def _watch_once(http: httpx.AsyncClient, url: str, headers: Mapping[str, str], state: WatchState,
                      cache: LookupCache, on_change: Callable[[AgentChange], None] | None) -> None:
    async with http.stream("GET", url + "/v1/agents/watch", headers=watch_headers(state, cache, headers),
                           timeout=_WATCH_TIMEOUT) as resp:
        if resp.status_code != 200:
            raw = await resp.aread()
            body: Any
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", errors="replace")
            hint = "the API key was refused" if "authorization" in {k.lower() for k in headers} else \
                "Agent-Reach needs an API key: set AGENTREACH_KEY or pass api_key="
            raise error_from_response(resp.status_code, body, resp.headers.get("Retry-After"),
                                      hint if resp.status_code == 401 else None)
        state.connected = True
        parser = SSEParser()
        async for line in resp.aiter_lines():
            ev = parser.feed(line)
            if ev is not None:
                apply_event(ev, state, cache, on_change)


async def watch_feed(http: httpx.AsyncClient, url: str, headers: Mapping[str, str], cache: LookupCache,
                     on_change: Callable[[AgentChange], None] | None) -> None:
    """Follows ``GET /v1/agents/watch`` until cancelled, applying every change to ``cache``.

    It reconnects with backoff after a lost connection, resuming after the
    last event read (``Last-Event-ID``) or, before any, from the oldest
    cached answer's ``watch_from``. A 4xx other than 429 (a refused key, a
    missing scope) ends it, logged.
    """
    state = WatchState()
    tries = 0
    while True:
        state.connected = False
        retry_after: float | None = None
        try:
            await _watch_once(http, url, headers, state, cache, on_change)
            why = "the feed ended"
        except APIError as e:
            if 400 <= e.status < 500 and e.status not in (408, 429):
                log.error("agentreach: the agent watch was refused (%s); cached lookups are bounded by their "
                          "TTL only", e)
                return
            why, retry_after = str(e), e.retry_after
        except (httpx.HTTPError, httpx.StreamError) as e:
            why = f"{type(e).__name__}: {e}".rstrip(": ")
        if state.connected:
            tries = 0
        wait = backoff(tries)
        if retry_after is not None:
            wait = max(wait, min(retry_after, 30.0))
        log.warning("agentreach: agent watch interrupted (%s); reconnecting in %.2f s", why, wait)
        tries += 1
        await asyncio.sleep(wait)
