"""Lookup mode without the service: invoke's failover and envelope, reports, the cache's rules,
the stale fallback from the cache file, the feed's parser. The registry and the agents are an
httpx.MockTransport: nothing leaves the process."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from agentreach import AgentChange, AsyncClient, Client, DirectReport, NoCandidates, Unavailable
from agentreach.direct import CallMemory, Candidate, LookupCache, SSEParser, call_timeout, question, trace_of, uuid7
from conftest import await_until

Agent = Callable[[httpx.Request], httpx.Response]


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def cand(agent_id: str, *, state: str = "HEALTHY", grant_in: float = 300, ttl_ms: int = 30_000,
         ns: str = "default", protocol: str = "http") -> dict[str, Any]:
    return {"agent_id": agent_id, "namespace": ns, "endpoint": f"http://127.0.0.1:1/{agent_id}",
            "protocol": protocol, "score": 1.0, "state": state, "ttl_ms": ttl_ms, "grant": f"v1.grant-of-{agent_id}.sig",
            "grant_expires_at": iso(time.time() + grant_in)}


class Fake:
    """A registry and its agents behind one MockTransport."""

    def __init__(self, candidates: list[dict[str, Any]], agents: dict[str, Agent] | None = None) -> None:
        self.candidates = candidates
        self.agents = agents or {}
        self.lookups: list[dict[str, Any]] = []
        self.reports: list[dict[str, Any]] = []
        self.report_answers: list[httpx.Response] = []
        self.calls: list[httpx.Request] = []
        self.down = False

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.url.path == "/v1/lookup":
            if self.down:
                raise httpx.ConnectError("connection refused", request=req)
            self.lookups.append(json.loads(req.content))
            return httpx.Response(200, json={"candidates": self.candidates, "ttl_ms": 30_000, "watch_from": 42})
        if req.url.path == "/v1/reports":
            self.reports.append(json.loads(req.content))
            return self.report_answers.pop(0) if self.report_answers else httpx.Response(202, json={"accepted": 1})
        self.calls.append(req)
        return self.agents[req.url.path.strip("/")](req)

    def client(self, **kw: Any) -> Client:
        t = httpx.MockTransport(self)
        return Client("http://127.0.0.1:9", api_key="ark_secret", http=httpx.Client(transport=t),
                      agent_http=httpx.Client(transport=t), max_retries=0, report_interval=3600, **kw)


def answer(status: str, result: Any = None, biz_code: str | None = None) -> Agent:
    body: dict[str, Any] = {"status": status, "result": result}
    if biz_code:
        body["biz_code"] = biz_code
    return lambda req: httpx.Response(200, json=body)


def status(code: int) -> Agent:
    return lambda req: httpx.Response(code, text="nope")


def timeout(req: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=req)


def test_invoke_fails_over_on_a_refused_grant_a_timeout_a_5xx_and_a_non_result_and_stops_at_failed() -> None:
    fake = Fake([cand("a"), cand("b"), cand("c"), cand("d"), cand("e"), cand("f")], {
        "a": status(401), "b": timeout, "c": status(500), "d": answer("MAYBE"),
        "e": answer("FAILED", {"why": "x"}, "out_of_paper"), "f": answer("SUCCESS"),
    })
    tp = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-00"
    with fake.client() as c:
        res = c.invoke("cap.x", {"n": 1}, traceparent=tp)
        assert (res.status, res.result, res.biz_code, res.agent_id) == ("FAILED", {"why": "x"}, "out_of_paper", "e")
        assert not res.succeeded and not res.stale
        assert [(a.agent_id, a.status_code, a.reached, a.grant_refused) for a in res.attempts] == [
            ("a", 401, False, True), ("b", 0, False, False), ("c", 500, False, False), ("d", 200, False, False),
            ("e", 200, True, False)]
        assert "no answer within" in (res.attempts[1].error or "")
        assert fake.lookups == [{"capability": "cap.x", "constraints": {"protocol": "http"}}]
        # One envelope per candidate: the same invocation and trace, the attempt counting, no result_url.
        envs = [json.loads(r.content) for r in fake.calls]
        assert [e["attempt"] for e in envs] == [1, 2, 3, 4, 5]
        assert {e["job_id"] for e in envs} == {res.invocation_id} and uuid.UUID(res.invocation_id).version == 7
        assert {e["trace_id"] for e in envs} == {"ab" * 16} == {res.trace_id}
        assert all(e["result_url"] == "" and e["capability"] == "cap.x" and e["payload"] == {"n": 1} for e in envs)
        assert all(e["deadline"].endswith("Z") for e in envs)
        for r, who in zip(fake.calls, "abcde"):
            assert r.headers["X-Reach-Grant"] == f"v1.grant-of-{who}.sig"
            assert r.headers["traceparent"].startswith("00-" + "ab" * 16 + "-") and r.headers["traceparent"].endswith("-00")
            assert "authorization" not in r.headers, "the API key never goes to an agent"
        assert fake.reports == []
        c.flush()
    # The refused grant says nothing of the agent's health: not reported.
    (batch,) = fake.reports
    assert "namespace" in batch and batch["namespace"] == "default"
    got = [(r["agent_id"], r["reached"], r["ok"], r.get("biz_code")) for r in batch["reports"]]
    assert got == [("b", False, False, None), ("c", False, False, None), ("d", False, False, None),
                   ("e", True, False, "out_of_paper")]
    assert all(r["capability"] == "cap.x" and r["latency_ms"] >= 0 and r["at"].endswith("Z") for r in batch["reports"])


def test_invoke_with_no_candidate_answering_raises_no_candidates_with_every_attempt() -> None:
    fake = Fake([cand("a"), cand("b", protocol="a2a")], {"a": status(503)})
    with fake.client() as c:
        with pytest.raises(NoCandidates) as err:
            c.invoke("cap.x", {})
        assert [a.agent_id for a in err.value.attempts] == ["a"]  # an a2a agent is not called
        assert "a: answered HTTP 503" in str(err.value)
        with pytest.raises(ValueError, match="http"):
            c.invoke("cap.x", {}, constraints={"protocol": "a2a"})
        with pytest.raises(ValueError, match="JSON"):
            c.invoke("cap.x", {"x": object()})
    fake.candidates = []
    with fake.client() as c, pytest.raises(NoCandidates, match="found no agent"):
        c.invoke("cap.x", {})


def test_invoke_with_hedge_races_a_slow_candidate_with_the_next_and_takes_the_first_result() -> None:
    release = threading.Event()

    def slow(req: httpx.Request) -> httpx.Response:
        release.wait(30)
        return httpx.Response(200, json={"status": "SUCCESS", "result": "slow"})

    fake = Fake([cand("slow"), cand("fast")], {"slow": slow, "fast": answer("SUCCESS", "fast")})
    try:
        with fake.client() as c:
            res = c.invoke("cap.x", {}, timeout=60, hedge=0.05)
            assert (res.result, res.agent_id) == ("fast", "fast")
            # The slow call was still running when the fast one answered: only the winner's attempt ended.
            assert [a.agent_id for a in res.attempts] == ["fast"]
            envs = sorted((json.loads(r.content) for r in fake.calls), key=lambda e: e["attempt"])
            assert [e["attempt"] for e in envs] == [1, 2] and len({e["job_id"] for e in envs}) == 1
    finally:
        release.set()


@pytest.mark.anyio
async def test_async_invoke_with_hedge_cancels_the_slow_call_once_the_next_answers() -> None:
    cancelled = asyncio.Event()

    async def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/slow":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return fake(req)

    fake = Fake([cand("slow"), cand("fast")], {"fast": answer("SUCCESS", 7)})
    t = httpx.MockTransport(handle)
    async with AsyncClient("http://127.0.0.1:9", http=httpx.AsyncClient(transport=t),
                           agent_http=httpx.AsyncClient(transport=t), max_retries=0, report_interval=3600) as c:
        res = await c.invoke("cap.x", None, timeout=60, hedge=0.05)
        assert (res.result, res.agent_id, [a.agent_id for a in res.attempts]) == (7, "fast", ["fast"])
        await asyncio.wait_for(cancelled.wait(), 30)


@pytest.mark.anyio
async def test_async_invoke_bounds_each_candidate_by_its_timeout() -> None:
    never = asyncio.Event()

    async def hang(req: httpx.Request) -> httpx.Response:
        await never.wait()
        return httpx.Response(200)

    async def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/slow":
            return await hang(req)
        return fake(req)

    fake = Fake([cand("slow"), cand("fast")], {"fast": answer("SUCCESS", 7)})
    t = httpx.MockTransport(handle)
    async with AsyncClient("http://127.0.0.1:9", http=httpx.AsyncClient(transport=t),
                           agent_http=httpx.AsyncClient(transport=t), max_retries=0, report_interval=3600) as c:
        started = time.monotonic()
        res = await c.invoke("cap.x", None, timeout=0.2)
        assert time.monotonic() - started < 5
        assert (res.result, res.agent_id, [a.agent_id for a in res.attempts]) == (7, "fast", ["slow", "fast"])
        assert res.attempts[0].latency >= 0.2 and "within 0.2 s" in (res.attempts[0].error or "")
    # Closing flushed the reports.
    assert [(r["agent_id"], r["reached"], r["ok"]) for r in fake.reports[0]["reports"]] == [
        ("slow", False, False), ("fast", True, True)]


def test_a_report_refused_by_index_is_dropped_and_the_rest_sent_and_an_unavailable_service_keeps_them() -> None:
    fake = Fake([])
    refused = httpx.Response(400, json={"error": {"code": "invalid_argument", "message": "not looked up",
                                                  "field": "reports[1].agent_id"}})
    fake.report_answers = [refused, httpx.Response(503, json={"error": {"code": "unavailable", "message": "db"}})]
    with fake.client() as c:
        c.report(*(DirectReport(a, "cap.x", True, ok=True, namespace="ns") for a in ("a", "b", "c")))
        with pytest.raises(Unavailable):
            c.flush()
        assert [[r["agent_id"] for r in b["reports"]] for b in fake.reports] == [["a", "b", "c"], ["a", "c"]]
        c.flush()  # still queued: sent now
        assert [r["agent_id"] for r in fake.reports[-1]["reports"]] == ["a", "c"]
        assert fake.reports[-1]["namespace"] == "ns"
        c.flush()
        assert len(fake.reports) == 3, "nothing left to send"
        # Reports of several namespaces go in a batch each.
        c.report(DirectReport("x", "cap.x", False, namespace="one"), DirectReport("y", "cap.x", False, namespace="two"),
                 DirectReport("z", "cap.x", False, namespace="one"))
        c.flush()
    assert [(b["namespace"], [r["agent_id"] for r in b["reports"]]) for b in fake.reports[3:]] == [
        ("one", ["x", "z"]), ("two", ["y"])]


def test_the_cache_serves_a_fresh_answer_without_asking_and_never_a_suspect_candidate() -> None:
    fake = Fake([cand("a", state="SUSPECT"), cand("b"), cand("c", state="DOWN")])
    with fake.client() as c:
        first = c.lookup("cap.x", hint="fast", limit=3)
        assert [x.agent_id for x in first.candidates] == ["a", "b", "c"] and not first.cached  # as answered
        assert "grant-of-a" not in repr(first.candidates[0]), "a grant is a credential: never in a repr"
        second = c.lookup("cap.x", hint="fast", limit=3)
        assert second.cached and [x.agent_id for x in second.candidates] == ["b"] and len(fake.lookups) == 1
        c.lookup("cap.x", hint="slow", limit=3)  # another question
        c.lookup("cap.x", hint="fast", limit=3, no_cache=True)
        assert len(fake.lookups) == 3


def test_a_cached_answer_is_fresh_until_its_ttl_or_a_margin_before_its_first_grant_expires() -> None:
    cache = LookupCache(2)
    q = question("cap.x", None, None, None, None)
    now = time.time()
    cache.store(q, {"candidates": [cand("a"), cand("b", grant_in=25)], "ttl_ms": 30_000}, now, cache.sequence())
    hit = cache.fresh(q.key, now + 14)
    assert hit is not None and 0 < hit.ttl <= 1.0 + 0.01
    assert cache.fresh(q.key, now + 15.01) is None, "10 s before b's grant expires"
    assert cache.stale(q.key) is not None, "kept as the last known list"
    cache.store(q, {"candidates": [cand("a", ttl_ms=5_000)], "ttl_ms": 30_000}, now, cache.sequence())
    assert cache.fresh(q.key, now + 4.9) is not None and cache.fresh(q.key, now + 5) is None
    # Least recently used out first.
    q2, q3 = question("cap.y", None, None, None, None), question("cap.z", None, None, None, None)
    cache.store(q2, {"candidates": [cand("a")], "ttl_ms": 30_000}, now, cache.sequence())
    cache.fresh(q.key, now)
    cache.store(q3, {"candidates": [cand("a")], "ttl_ms": 30_000}, now, cache.sequence())
    assert cache.stale(q2.key) is None and cache.stale(q.key) is not None and cache.stale(q3.key) is not None


def change(agent_id: str, state: str = "", kind: str = "AGENT_STATE_CHANGED", ns: str = "default") -> AgentChange:
    return AgentChange(kind, ns, agent_id, state, 7, None)


def test_the_watch_feed_drops_an_agent_that_left_healthy_and_unfreshens_on_other_changes() -> None:
    cache = LookupCache()
    now = time.time()
    q, other = question("cap.x", None, "default", None, None), question("cap.x", None, "other", None, None)
    for qq in (q, other):
        cache.store(qq, {"candidates": [cand("a", ns=qq.namespace), cand("b", ns=qq.namespace)], "ttl_ms": 30_000,
                         "watch_from": 5}, now, cache.sequence())
    assert cache.watch_from() == 5
    assert cache.agent_changed(change("a", "DOWN"))
    hit = cache.fresh(q.key, now)
    assert hit is not None and [x.agent_id for x in hit.candidates] == ["b"]
    assert not cache.agent_changed(change("a", "HEALTHY", ns="other"))  # back: ask again, in its namespace only
    assert cache.fresh(other.key, now) is None and cache.stale(other.key) is not None
    assert cache.fresh(q.key, now) is not None
    assert cache.agent_changed(change("b", kind="AGENT_DEREGISTERED"))
    assert cache.stale(q.key) is None, "a list left with no candidate is forgotten"
    # An answer whose request left before a change may predate it: stale use only.
    seq = cache.sequence()
    cache.agent_changed(change("z", "SUSPECT"))
    cache.store(q, {"candidates": [cand("a")], "ttl_ms": 30_000}, now, seq)
    assert cache.fresh(q.key, now) is None and cache.stale(q.key) is not None


def test_with_the_registry_unreachable_a_new_client_serves_the_cache_files_lists_as_stale(tmp_path: Path) -> None:
    file = tmp_path / "reach.json"
    fake = Fake([cand("a"), cand("b")], {"a": answer("SUCCESS", "from a"), "b": answer("SUCCESS", "from b")})
    with fake.client(cache_file=file) as c:
        c.invoke("cap.x", {})
    assert file.stat().st_mode & 0o777 == 0o600
    fake.down = True
    with fake.client(cache_file=file) as cold:
        assert cold.lookup("cap.x", constraints={"protocol": "http"}).stale
        res = cold.invoke("cap.x", {})
        assert (res.stale, res.result) == (True, "from a")
        cold.flush()
        with pytest.raises(Exception, match="ConnectError"):
            cold.lookup("cap.never-asked")
    # A change the feed applies is written too: a start from the file does not offer it.
    cache = LookupCache(file=file)
    cache.agent_changed(change("a", "DOWN"))
    cache.persist()
    st = LookupCache(file=file).stale(question("cap.x", None, None, {"protocol": "http"}, None).key)
    assert st is not None and [x.agent_id for x in st.candidates] == ["b"]


def test_the_feed_parser_reads_events_ids_multiline_data_and_skips_comments() -> None:
    p = SSEParser()
    lines = [": keepalive", "", "id: 12", "event: agent", 'data: {"a":', "data: 1}", "", "data:x", ""]
    out = [ev for ev in (p.feed(line) for line in lines) if ev is not None]
    assert out == [("12", "agent", '{"a":\n1}'), ("", "", "x")]


def test_invocation_ids_are_uuid7_in_time_order_and_traces_continue_or_start() -> None:
    ids = [uuid7() for _ in range(50)]
    assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122 for i in ids)
    assert [i[:13] for i in ids] == sorted(i[:13] for i in ids)
    assert trace_of("00-" + "0a" * 16 + "-" + "1" * 16 + "-01") == ("0a" * 16, "01")
    for bad in (None, "", "00-" + "0" * 32 + "-" + "1" * 16 + "-01", "junk"):
        tid, flags = trace_of(bad)
        assert len(tid) == 32 and tid != "0" * 32 and flags == "01"


@pytest.mark.anyio
async def test_the_async_watch_starts_from_watch_from_resumes_after_the_last_event_and_stops_when_refused() -> None:
    fake = Fake([cand("a"), cand("b")])
    feeds: list[httpx.Request] = []
    changes: list[AgentChange] = []
    down = {"type": "AGENT_STATE_CHANGED", "namespace": "default", "agent_id": "a", "state": "DOWN"}

    def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path != "/v1/agents/watch":
            return fake(req)
        feeds.append(req)
        if len(feeds) == 1:  # one change, a keepalive, then the connection is lost
            body = f": keepalive\n\nid: 43\nevent: agent\ndata: {json.dumps(down)}\n\n".encode()
            return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=body)
        return httpx.Response(403, json={"error": {"code": "permission_denied", "message": "no agents:read"}})

    t = httpx.MockTransport(handle)
    async with AsyncClient("http://127.0.0.1:9", api_key="ark_secret", http=httpx.AsyncClient(transport=t),
                           max_retries=0, on_agent_change=changes.append) as c:
        both = await asyncio.gather(c.lookup("cap.x"), c.lookup("cap.x"))
        assert len(fake.lookups) == 1, "two lookups of one question at once: one request"
        assert [x.agent_id for x in both[1].candidates] == ["a", "b"]
        c.watch()

        async def refused() -> bool:
            return len(feeds) == 2 and c._watcher is not None and c._watcher.done()

        await await_until(refused, what="the feed to resume, and stop when refused")
        assert [r.headers.get("Last-Event-ID") for r in feeds] == ["42", "43"]
        assert all(r.headers["Authorization"] == "Bearer ark_secret" for r in feeds)
        assert [(ch.agent_id, ch.state, ch.position) for ch in changes] == [("a", "DOWN", 43)]
        cached = await c.lookup("cap.x")
        assert cached.cached and [x.agent_id for x in cached.candidates] == ["b"] and len(fake.lookups) == 1


@pytest.mark.parametrize("samples,ceiling,want", [
    ([], 30.0, 30.0),                                   # no calls yet: the ceiling
    ([0.005] * 9, 30.0, 30.0),                          # fewer than ten answered
    ([0.005] * 9 + [0.009], 30.0, 1.0),                 # fast calls: at least a second
    ([0.5] * 9 + [2.0], 30.0, 6.0),                     # three times the p99
    ([0.5] * 9 + [20.0], 30.0, 30.0),                   # never past the ceiling
    ([0.005] * 10, 0.3, 0.3),                           # a ceiling under a second wins
])
def test_call_timeout(samples: list[float], ceiling: float, want: float) -> None:
    assert call_timeout(samples, ceiling) == pytest.approx(want)


def test_call_memory_tries_quarantined_candidates_last_until_the_quarantine_ends() -> None:
    def cand(agent_id: str) -> Candidate:
        return Candidate(agent_id=agent_id, namespace="ns", endpoint="http://127.0.0.1:1/", protocol="http",
                         score=1.0, state="HEALTHY", ttl_ms=1000, grant="g", grant_expires_at=None)

    now = [100.0]
    cands = [cand("a"), cand("b"), cand("c")]
    m = CallMemory(quarantine=30, clock=lambda: now[0])
    assert [c.agent_id for c in m.order(cands)] == ["a", "b", "c"]
    m.failed(cands[0])
    assert [c.agent_id for c in m.order(cands)] == ["b", "c", "a"]
    now[0] += 30
    assert [c.agent_id for c in m.order(cands)] == ["a", "b", "c"]
    off = CallMemory(quarantine=0)
    off.failed(cands[0])
    assert [c.agent_id for c in off.order(cands)] == ["a", "b", "c"]


def test_run_against_a_service_without_wait_ms_submits_again_under_the_same_key_and_polls() -> None:
    seen: list[tuple[str, str, dict[str, Any] | None, str | None]] = []
    polls = [0]

    def handle(req: httpx.Request) -> httpx.Response:
        body = json.loads(req.content) if req.content else None
        seen.append((req.method, req.url.path, body, req.headers.get("Idempotency-Key")))
        if req.method == "POST" and body and "wait_ms" in body:  # a service older than wait_ms
            return httpx.Response(400, json={"error": {"code": "invalid_argument", "field": "wait_ms",
                                                       "message": 'json: unknown field "wait_ms"'}})
        if req.method == "POST":
            return httpx.Response(202, json={"job_id": "j1", "status": "SUBMITTED", "trace_id": "t"})
        polls[0] += 1
        return httpx.Response(200, json={"job_id": "j1", "status": "SUCCESS" if polls[0] > 2 else "DELIVERED",
                                         "capability": "c", "result": {"ok": True}})

    with Client("http://127.0.0.1:9", http=httpx.Client(transport=httpx.MockTransport(handle)), max_retries=0) as c:
        job = c.run("c", {}, timeout=10)
    assert (job.status, job.result) == ("SUCCESS", {"ok": True})
    first, second = seen[0], seen[1]
    assert first[2] is not None and "wait_ms" in first[2]
    assert second[0] == "POST" and second[2] is not None and "wait_ms" not in second[2]
    assert first[3] and first[3] == second[3], "the fallback submit is the same submit"
