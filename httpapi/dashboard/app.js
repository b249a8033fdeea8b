// Agent-Reach dashboard: plain JavaScript over the public API.
//
// Every view has its own address under /dashboard/, so a job, an agent or a
// filtered list can be bookmarked and shared:
//   /dashboard/agents?namespace=&q=&sort=&dir=&window=   the agents
//   /dashboard/agents/NAMESPACE/AGENT_ID                 one agent
//   /dashboard/jobs?q=&since=&status=&capability=&agent_id=&namespace=&cursor=
//   /dashboard/jobs/JOB_ID                               one job's timeline
//   /dashboard/dead?capability=&agent_id=&namespace=     dead letters
//   /dashboard/alerts?namespace=&kind=                   alerts
// Sign-in posts the key once to /v1/session, which sets it as an HttpOnly
// cookie; the page never keeps the key itself. The current view refreshes
// every two seconds.
"use strict";
const $ = (s, root = document) => root.querySelector(s);
const $$ = (s, root = document) => Array.from(root.querySelectorAll(s));
const BASE = "/dashboard";
let session = null;
let current = null; // the mounted view: {update, route}
let failures = 0, refreshError = "";

// ---- the API -------------------------------------------------------------

class APIError extends Error {
  constructor(status, code, message, retryAfter) { super(message); this.status = status; this.code = code; this.retryAfter = retryAfter; }
}

async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, Object.assign({ credentials: "same-origin" }, opts, { headers }));
  const body = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) {
    const e = (body && body.error) || {};
    throw new APIError(res.status, e.code || "http_" + res.status, e.message || res.statusText, Number(res.headers.get("Retry-After")) || 0);
  }
  return body;
}
const enc = encodeURIComponent;
const nsq = (ns) => ns ? "?namespace=" + enc(ns) : "";

// ---- small helpers -------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c != null && c !== false) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
const link = (href, ...children) => el("a", { href, "data-link": true }, ...children);
const pill = (v, cls) => el("span", { class: "pill " + (cls || v) }, v);
const pct = (v) => v == null ? "—" : (100 * v).toFixed(1) + "%";
const ms = (v) => v == null ? "–" : v < 10 ? v.toFixed(2) + " ms" : v < 1000 ? v.toFixed(1) + " ms" : (v / 1000).toFixed(2) + " s";
const clock = (t) => { const d = new Date(t); return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0"); };
function ago(t) {
  if (!t) return "–";
  const s = (Date.now() - new Date(t)) / 1000;
  return s < 1 ? "just now" : s < 60 ? s.toFixed(0) + "s ago" : s < 3600 ? (s / 60).toFixed(0) + "m ago" : s < 86400 ? (s / 3600).toFixed(1) + "h ago" : (s / 86400).toFixed(1) + "d ago";
}
function span(msv) {
  if (msv < 1) return "+" + msv.toFixed(2) + " ms";
  if (msv < 1000) return "+" + msv.toFixed(0) + " ms";
  if (msv < 60000) return "+" + (msv / 1000).toFixed(2) + " s";
  return "+" + (msv / 60000).toFixed(1) + " min";
}
function bar(v) {
  const b = el("span", { class: "bar" }), i = el("i");
  i.style.width = v == null ? "0" : Math.round(100 * v) + "%";
  if (v != null && v < 0.95) i.style.background = v < 0.8 ? "var(--bad)" : "var(--warn)";
  b.append(i);
  return b;
}
function setStatus(s, bad) { const st = $("#status"); st.textContent = s; st.classList.toggle("bad", !!bad); }
function shorten(s, n) { s = String(s); return s.length > n ? s.slice(0, n) + "…" : s; }
const json = (v) => typeof v === "string" ? v : JSON.stringify(v);

// One word, one figure: every figure of an agent is named the same way in
// the table, the agent's header and its charts, and says in its tooltip
// what it counts (the API's fields, docs/api.md).
const FIGURES = {
  health: { label: "health", title: "health_score: reach and success weighted together, 0 to 1, over the attempts of the window that ended; — when none ended" },
  reach: { label: "reached", title: "reach_rate: attempts delivered to the agent (it took them), of its attempts (those still waiting in a pull agent's inbox left out)" },
  success: { label: "answered OK of attempts", title: "success_rate: attempts that ended SUCCESS, of every attempt that ended — delivery failures and timeouts count against it; pending ones are left out" },
  business: { label: "business success of answered", title: "business_success_rate: attempts that ended SUCCESS, of those the agent was reached for and answered — its own failures apart from reach failures" },
  attempts: { label: "attempts", title: "attempted: attempts routed to the agent" },
  latency: { label: "time to result p95", title: "latency_p95_ms: from delivery to the agent's result, 95th percentile" },
};
const figure = (key, value) => el("span", { class: "figure", "data-figure": key, title: FIGURES[key].title }, FIGURES[key].label + " ", el("b", {}, value));

// breakerText names a breaker state in words: half-open, open, closed.
const breakerText = (state) => String(state || "").replace(/_/g, "-");
const breakerPill = (b) => el("span", { class: "pill " + b.state, title: "circuit breaker: " + breakerText(b.state) +
  (b.attempts ? ", " + (100 * b.error_rate).toFixed(0) + "% errors over " + b.attempts + " attempts of its window" : ", no attempts in its window") }, breakerText(b.state));
const leasePill = (state) => el("span", { class: "pill " + state, title: "lease state: from the agent's heartbeats and the operator's actions, not from its attempts" }, state);

// health shows a health score, "—" (never a number) when the window has
// no attempt that ended.
function health(v, window = "1h") {
  return v == null ? el("span", { class: "muted", title: "no attempts in the window (" + window + "): no health score" }, "—")
    : el("span", { title: FIGURES.health.title }, v.toFixed(2));
}

// healthNote explains a lease state and a health score that seem to
// disagree (a HEALTHY lease, a poor or missing health), from the figures.
const plural = (n, word) => n + " " + word + (n === 1 ? "" : "s");
function healthNote(state, m, window = "1h") {
  const lease = state + (state === "HEALTHY" ? " (lease: heartbeats on time)" : " (lease)");
  if (m.health_score == null) {
    if (!m.attempted) return lease + " · health —: no attempts in the last " + window;
    return lease + " · health —: none of its " + plural(m.attempted, "attempt") + " in the last " + window + " has ended yet" + (m.pending ? " (" + m.pending + " pending)" : "");
  }
  if (state !== "HEALTHY" || m.health_score >= 0.8) return null;
  const settled = (m.attempted || 0) - (m.pending || 0);
  const answered = (m.succeeded || 0) + (m.failed || 0) + (m.timed_out || 0);
  let why;
  if (!m.delivered) why = "none of its " + plural(settled, "attempt") + " reached it (delivery failures)";
  else if (!answered) why = m.delivered + " of " + plural(settled, "attempt") + " reached it, none answered yet";
  else why = m.delivered + " of " + plural(settled, "attempt") + " reached it, " + (m.succeeded || 0) + " answered OK, " + (m.failed || 0) + " failed, " + (m.timed_out || 0) + " timed out";
  return lease + " · health " + m.health_score.toFixed(2) + ": " + why + " in the last " + window;
}

// notFound is the view of a job or agent the API does not know (404): what
// was asked for, why it is not shown, a way back, and no action.
function notFound(root, what, id, back, backText) {
  root.replaceChildren(el("div", { class: "not-found", "data-not-found": what },
    el("h2", {}, what === "job" ? "Job not found" : "Agent not found"),
    el("p", {}, el("code", {}, id), ": no such " + what + " in the namespaces of this key."),
    el("p", {}, link(back, backText))));
}

// draw redraws a table body only when its rows changed, so a row being
// clicked is not replaced under the pointer.
function draw(tbody, sig, rows) {
  if (tbody.dataset.sig === sig) return;
  tbody.dataset.sig = sig;
  tbody.replaceChildren(...rows().flat().filter((x) => x != null && x !== false));
}

// The query of the current address, and a way to change it in place (a
// filter typed into a toolbar) without a new history entry per keystroke.
const query = () => new URLSearchParams(location.search);
function setQuery(changes) {
  const q = query();
  for (const [k, v] of Object.entries(changes)) { if (v === "" || v == null) q.delete(k); else q.set(k, v); }
  const s = q.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
}

// confirmAction asks before an operator's action: a dialog with what will
// happen and, when the action records one, a reason.
function confirmAction({ title, text, reason = true, ok = "Confirm" }) {
  const d = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-text").textContent = text;
  $("#confirm-reason-label").hidden = !reason;
  $("#confirm-reason").value = "";
  $("#confirm-ok").textContent = ok;
  return new Promise((resolve) => {
    // The close event is queued: one from an earlier confirmation may
    // arrive after this dialog opened, so only a close that left the
    // dialog shut answers.
    const closed = () => {
      if (d.open) return;
      d.removeEventListener("close", closed);
      resolve({ ok: d.returnValue === "ok", reason: $("#confirm-reason").value.trim() });
    };
    d.addEventListener("close", closed);
    d.returnValue = "";
    d.showModal();
    (reason ? $("#confirm-reason") : $("#confirm-ok")).focus();
  });
}

// ---- sign-in ------------------------------------------------------------

async function checkSession() {
  try {
    session = await api("/v1/session");
    showSignedIn();
    return true;
  } catch (e) {
    if (e.status !== 401) throw e;
    const had = localStorage.getItem("agentreach.signedIn") === "1";
    showSignIn(had ? "The key this browser kept was refused (" + e.message + "). Enter a key to sign in again."
      : "An API key is needed to use the dashboard.");
    return false;
  }
}

function showSignIn(message) {
  session = null;
  current = null;
  $("#view").replaceChildren();
  $("#signin").hidden = false;
  $("#signin-msg").textContent = message;
  $("#who").hidden = $("#signout").hidden = $("#riverui-link").hidden = true;
  $("#key").focus();
}

function showSignedIn() {
  $("#signin").hidden = true;
  localStorage.setItem("agentreach.signedIn", "1");
  const who = $("#who");
  who.hidden = false;
  who.textContent = session.authentication === "off" ? "authentication is off (--insecure)"
    : "key " + session.key_id + " · namespace " + session.namespace + " · " + session.scopes.join(", ");
  $("#signout").hidden = session.authentication === "off";
  $("#riverui-link").hidden = !session.river_ui;
}

$("#signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const key = $("#key").value.trim();
  if (!key) { $("#signin-msg").textContent = "Enter an API key (ark_…)."; return; }
  try {
    session = await api("/v1/session", { method: "POST", headers: { Authorization: "Bearer " + key } });
  } catch (e) {
    $("#signin-msg").textContent = e.status === 401 ? "That key was refused: " + e.message + "."
      : e.status === 429 ? "Too many failed sign-ins from this address: try again in " + (e.retryAfter || "a few") + " s."
        : "Sign-in failed: " + e.message;
    return;
  } finally { $("#key").value = ""; }
  const next = query().get("next");
  if (next && next.startsWith("/riverui") && !next.startsWith("//")) { location.assign(next); return; }
  showSignedIn();
  render();
});

$("#signout").addEventListener("click", async () => {
  await api("/v1/session", { method: "DELETE" }).catch(() => null);
  localStorage.removeItem("agentreach.signedIn");
  showSignIn("Signed out.");
});

// ---- navigation ----------------------------------------------------------

function parseRoute() {
  const parts = location.pathname.slice(BASE.length).split("/").filter(Boolean).map(decodeURIComponent);
  const q = query();
  switch (parts[0] || "agents") {
    case "agents": return parts.length >= 3 ? { view: "agent", ns: parts[1], id: parts[2], q } : { view: "agents", q };
    case "jobs": return parts[1] ? { view: "job", id: parts[1], q } : { view: "jobs", q };
    case "dead": return { view: "dead", q };
    case "alerts": return { view: "alerts", q };
  }
  return { view: "missing", q };
}

function go(href) { history.pushState(null, "", href); render(); }

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-link]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  go(a.getAttribute("href"));
});
window.addEventListener("popstate", render);

const views = { agents: agentsView, agent: agentView, jobs: jobsView, job: jobView, dead: deadView, alerts: alertsView, missing: missingView };

function render() {
  if (!session) return;
  const route = parseRoute();
  const tab = route.view === "agent" ? "agents" : route.view === "job" ? "jobs" : route.view;
  $$("nav a[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === tab));
  const root = el("div", { class: "view", "data-view": route.view });
  $("#view").replaceChildren(root);
  current = views[route.view](root, route);
  refresh();
}

async function refresh() {
  if (!current || !session) return;
  const view = current;
  try {
    await view.update();
    // Clear only the refresh's own error: an operator action's answer stays.
    if (failures && $("#status").textContent === refreshError) setStatus("");
    failures = 0;
  } catch (e) {
    if (e.status === 401) { showSignIn("The service refused the key (" + e.message + "): sign in again."); return; }
    failures++;
    refreshError = e.message;
    setStatus(e.message, true);
  }
}

// ---- agents -------------------------------------------------------------

// spark draws the last hour as 60 one-minute bars: height is attempts,
// green the share that succeeded, red the rest.
function spark(points) {
  const w = 120, h = 24, ns = "http://www.w3.org/2000/svg", slot = w / 60;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h); svg.setAttribute("class", "spark");
  const rect = (x, y, width, height, color) => {
    const r = document.createElementNS(ns, "rect");
    r.setAttribute("x", x.toFixed(1)); r.setAttribute("y", y.toFixed(1)); r.setAttribute("width", width.toFixed(1));
    r.setAttribute("height", height.toFixed(1)); r.setAttribute("fill", color); svg.append(r);
  };
  rect(0, h - 1, w, 1, "#243040");
  if (!points || points.length === 0) return svg;
  const now = Date.now(), max = Math.max(1, ...points.map((p) => p.attempted));
  for (const p of points) {
    const age = Math.floor((now - new Date(p.minute)) / 60000);
    if (age < 0 || age >= 60 || p.attempted === 0) continue;
    const x = w - (age + 1) * slot, total = Math.max(2, (p.attempted / max) * (h - 2)), ok = total * (p.succeeded / p.attempted);
    rect(x, h - 1 - total, Math.max(1, slot - 0.5), total - ok, "#f0555a");
    rect(x, h - 1 - ok, Math.max(1, slot - 0.5), ok, "#2fbf71");
  }
  const title = document.createElementNS(ns, "title");
  title.textContent = points.reduce((a, p) => a + p.attempted, 0) + " attempts in the last hour";
  svg.append(title);
  return svg;
}

const agentHref = (ns, id) => BASE + "/agents/" + enc(ns) + "/" + enc(id);

// The agents table: sortable, filtered by namespace and text, lease state
// and health apart.
const agentColumns = [
  ["agent", "Agent", (a) => a.agent_id],
  ["namespace", "Namespace", (a) => a.namespace],
  ["lease", "Lease", (a) => a.state],
  ["health", "Health", (a, m) => m.health_score ?? null],
  ["reach", "Reached", (a, m) => m.reach_rate ?? null],
  ["success", "OK of attempts", (a, m) => m.success_rate ?? null],
  ["latency", "p50 / p95", (a, m) => m.latency_p95_ms ?? null],
  ["breaker", "Breaker", (a) => a.breaker.state],
  ["load", "In flight", (a) => a.in_flight],
  ["heartbeat", "Last heartbeat", (a) => -new Date(a.last_heartbeat_at)],
  [null, "Last hour"],
];

function agentsView(root, route) {
  const q = route.q;
  const win = el("select", { id: "window", "aria-label": "window" }, ...["5m", "1h", "24h"].map((w) => el("option", { selected: (q.get("window") || "1h") === w }, w)));
  const nsSel = el("select", { id: "f-namespace", "aria-label": "namespace" }, el("option", { value: "" }, "every namespace"));
  const text = el("input", { id: "f-agent-text", placeholder: "filter: agent or capability", value: q.get("q") || "" });
  const stamp = el("span", { class: "muted" });
  const banner = el("div", { id: "self-preservation", class: "banner", hidden: true });
  const fleetWin = el("select", { id: "fleet-window", "aria-label": "fleet window" }, ...["1h", "24h", "7d"].map((w) => el("option", { selected: (q.get("fleet") || "1h") === w }, w)));
  const fleet = el("div", { id: "fleet", class: "charts fleet" });
  const thead = el("tr", {}, agentColumns.map(([key, label]) => key ? el("th", { "data-sort": key, class: "sortable", title: FIGURES[key] ? FIGURES[key].title : null }, label) : el("th", {}, label)));
  const tbody = el("tbody");
  root.append(el("div", { class: "toolbar" }, el("span", { class: "muted" }, "Window"), win, nsSel, text,
    session.river_ui ? el("a", { href: "/riverui/", class: "button" }, "River UI ↗") : null, stamp),
  banner, el("section", { class: "fleet-box" }, el("h3", {}, "Fleet ", fleetWin), fleet),
  el("table", { id: "agents-table" }, el("thead", {}, thead), tbody));
  const sortMark = () => $$("th[data-sort]", thead).forEach((th) => {
    const s = query().get("sort") || "agent", d = query().get("dir") || "asc";
    th.classList.toggle("sorted", th.dataset.sort === s);
    th.dataset.dir = th.dataset.sort === s ? d : "";
  });
  sortMark();
  thead.addEventListener("click", (e) => {
    const th = e.target.closest("th[data-sort]");
    if (!th) return;
    const s = query().get("sort") || "agent", d = query().get("dir") || "asc";
    setQuery({ sort: th.dataset.sort, dir: s === th.dataset.sort && d === "asc" ? "desc" : "asc" });
    sortMark(); refresh();
  });
  win.addEventListener("change", () => { setQuery({ window: win.value === "1h" ? "" : win.value }); refresh(); });
  fleetWin.addEventListener("change", () => { setQuery({ fleet: fleetWin.value === "1h" ? "" : fleetWin.value }); refresh(); });
  nsSel.addEventListener("change", () => { setQuery({ namespace: nsSel.value }); refresh(); });
  text.addEventListener("input", () => { setQuery({ q: text.value }); refresh(); });

  return {
    async update() {
      const ns = query().get("namespace") || "";
      const [agents, metrics, series, fleetSeries] = await Promise.all([api("/v1/agents"), api("/v1/metrics/agents?window=" + win.value),
        api("/v1/metrics/agents/series"), api("/v1/metrics/fleet?window=" + fleetWin.value + (ns ? "&namespace=" + encodeURIComponent(ns) : ""))]);
      draw(fleet, JSON.stringify(fleetSeries), () => fleetCharts(fleetSeries));
      const namespaces = [...new Set(agents.agents.map((a) => a.namespace))].sort();
      if (ns && !namespaces.includes(ns)) namespaces.push(ns);
      const opts = ["", ...namespaces];
      if (nsSel.dataset.sig !== opts.join(",")) {
        nsSel.dataset.sig = opts.join(",");
        nsSel.replaceChildren(...opts.map((n) => el("option", { value: n, selected: n === ns }, n || "every namespace")));
      }
      const key = (n, id) => n + "/" + id;
      const byAgent = Object.fromEntries(metrics.agents.map((m) => [key(m.namespace, m.agent_id), m]));
      const points = {};
      for (const p of series.points) (points[key(p.namespace, p.agent_id)] = points[key(p.namespace, p.agent_id)] || []).push(p);
      const needle = (query().get("q") || "").toLowerCase();
      let list = agents.agents.filter((a) => (!ns || a.namespace === ns) &&
        (!needle || a.agent_id.toLowerCase().includes(needle) || a.capabilities.some((c) => c.toLowerCase().includes(needle))));
      const sort = query().get("sort") || "agent", dir = query().get("dir") === "desc" ? -1 : 1;
      const col = agentColumns.find((c) => c[0] === sort) || agentColumns[0];
      // A figure of nothing (n/a) sorts last whichever the direction.
      list = list.slice().sort((x, y) => {
        const a = col[2](x, byAgent[key(x.namespace, x.agent_id)] || {}), b = col[2](y, byAgent[key(y.namespace, y.agent_id)] || {});
        if ((a == null) !== (b == null)) return a == null ? 1 : -1;
        return (a < b ? -1 : a > b ? 1 : x.agent_id < y.agent_id ? -1 : 1) * dir;
      });
      draw(tbody, JSON.stringify([list, byAgent, points, sort, dir]), () => list.length ? list.map((a) => agentRow(a, byAgent[key(a.namespace, a.agent_id)] || {}, points[key(a.namespace, a.agent_id)], win.value))
        : [el("tr", {}, el("td", { colspan: agentColumns.length, class: "empty" }, agents.agents.length ? "No agent matches these filters." : "No agents registered yet: start one with `agentreach mock-agent`."))]);
      const sp = (agents.self_preservation || []).filter((p) => !ns || p.namespace === ns);
      banner.hidden = sp.length === 0;
      banner.textContent = sp.map((p) => "Self-preservation in " + p.namespace + ": " + p.lapsing + " of " + p.agents +
        " agents lapsed at once and are kept from going DOWN (since " + new Date(p.since).toLocaleTimeString() + ", until " +
        new Date(p.until).toLocaleTimeString() + " at the latest).").join(" ");
      stamp.textContent = "updated " + new Date().toLocaleTimeString();
    },
  };
}

function agentRow(a, m, points, win) {
  const note = healthNote(a.state, m, win);
  return el("tr", { "data-agent": a.agent_id, "data-namespace": a.namespace },
    el("td", {}, link(agentHref(a.namespace, a.agent_id), el("strong", {}, a.agent_id)),
      a.mode === "pull" ? [" ", el("span", { class: "pill pull", title: "pull agent: claims its work, no endpoint" }, "pull")] : null,
      el("div", { class: "muted" }, a.capabilities.join(", "))),
    el("td", {}, a.namespace),
    el("td", { class: "lease" }, leasePill(a.state), a.hold ? [" ", pill("hold: " + a.hold, "hold")] : null,
      a.paused_until ? [" ", el("span", { class: "pill hold", title: "It answered 429 or 503 with Retry-After: no new work until then, no failure counted." },
        "paused until " + new Date(a.paused_until).toLocaleTimeString())] : null),
    el("td", { class: "health", title: note }, bar(m.health_score), health(m.health_score, win),
      m.health_score != null && note ? el("span", { class: "disagree", title: note }, " ⚠") : null),
    el("td", { title: FIGURES.reach.title }, pct(m.reach_rate)), el("td", { title: FIGURES.success.title }, pct(m.success_rate)),
    el("td", {}, m.latency_p50_ms == null ? "–" : m.latency_p50_ms.toFixed(1) + " / " + m.latency_p95_ms.toFixed(1)),
    el("td", { class: "breaker" }, breakerPill(a.breaker)),
    el("td", {}, a.in_flight + (a.max_concurrent ? " / " + a.max_concurrent : ""),
      a.mode === "pull" ? el("div", { class: "muted inbox", title: "attempts waiting to be claimed" }, "inbox " + (a.inbox_depth || 0)) : null),
    el("td", {}, ago(a.last_heartbeat_at)), el("td", {}, spark(points)));
}

// fleetCharts draws the fleet's window (GET /v1/metrics/fleet): attempts,
// error rate and time to result per bucket, every bucket in its place.
function fleetCharts(s) {
  const per = s.bucket_seconds === 60 ? "minute" : "hour";
  const total = s.points.reduce((n, p) => n + p.attempted, 0);
  const undelivered = (p) => Math.max(0, p.attempted - p.delivered);
  const ended = s.points.reduce((n, p) => n + undelivered(p) + p.succeeded + p.failed + p.timed_out, 0);
  const errors = s.points.reduce((n, p) => n + undelivered(p) + p.failed + p.timed_out, 0);
  return [
    fleetChart("throughput", "Throughput", "attempts a " + per + ", routed to any agent", s.points, (p) => p.attempted, { bars: true, summary: total + " attempts in " + s.window }),
    fleetChart("errors", "Error rate", "attempts that ended without success (not delivered, failed, timed out) over those that ended, a " + per, s.points, (p) => p.error_rate == null ? null : 100 * p.error_rate,
      { unit: " %", max: 100, color: "var(--bad)", summary: ended ? (100 * errors / ended).toFixed(1) + " % in " + s.window : "nothing ended in " + s.window }),
    fleetChart("latency", "Latency p95", "time to result, the 95th percentile of the " + per + "'s results", s.points, (p) => p.latency_p95_ms,
      { unit: " ms", format: (v) => v.toFixed(v < 10 ? 1 : 0), summary: "p95 a " + per }),
  ];
}

function fleetChart(key, label, title, points, value, { unit = "", bars = false, max = null, color = "var(--info)", format = (v) => v, summary = "" } = {}) {
  const w = 300, h = 80, ns = "http://www.w3.org/2000/svg", slot = w / Math.max(1, points.length);
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + w + " " + h); svg.setAttribute("class", "chart"); svg.setAttribute("role", "img");
  const pts = points.map((p, i) => [(i + 0.5) * slot, value(p)]).filter((p) => p[1] != null);
  const top = max ?? Math.max(1e-9, ...pts.map((p) => p[1]));
  const y = (v) => h - 4 - (v / top) * (h - 10);
  const add = (name, attrs) => { const e = document.createElementNS(ns, name); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); svg.append(e); return e; };
  add("line", { x1: 0, x2: w, y1: h - 4, y2: h - 4, stroke: "#243040" });
  if (bars) for (const [x, v] of pts) add("rect", { x: (x - slot / 2).toFixed(2), y: y(v).toFixed(1), width: Math.max(0.5, slot - 0.5).toFixed(2), height: (h - 4 - y(v)).toFixed(1), fill: color });
  else if (pts.length) {
    add("polyline", { points: pts.map(([x, v]) => x.toFixed(1) + "," + y(v).toFixed(1)).join(" "), fill: "none", stroke: color, "stroke-width": 2 });
    for (const [x, v] of pts) add("circle", { cx: x.toFixed(1), cy: y(v).toFixed(1), r: 1.5, fill: color });
  }
  return el("figure", { class: "chart-box", "data-chart": "fleet-" + key, title },
    el("figcaption", {}, label, el("div", { class: "muted" }, summary + (pts.length ? " · scale " + format(top) + unit : ""))), svg);
}

// chart draws one hour of per-minute values as a line (or bars), with its
// last value and a scale.
function chart(key, minutes, value, { unit = "", bars = false, max = null, color = "var(--info)", format = (v) => v, hour = null, empty = "no attempts in the hour" } = {}) {
  const w = 300, h = 80, ns = "http://www.w3.org/2000/svg", slot = w / 60, now = Date.now();
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + w + " " + h); svg.setAttribute("class", "chart"); svg.setAttribute("role", "img");
  const pts = [];
  for (const m of minutes) {
    const age = Math.floor((now - new Date(m.minute)) / 60000), v = value(m);
    if (age < 0 || age >= 60 || v == null) continue;
    pts.push([w - (age + 0.5) * slot, v]);
  }
  const top = max ?? Math.max(1e-9, ...pts.map((p) => p[1]));
  const y = (v) => h - 4 - (v / top) * (h - 10);
  const add = (name, attrs) => { const e = document.createElementNS(ns, name); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); svg.append(e); return e; };
  add("line", { x1: 0, x2: w, y1: h - 4, y2: h - 4, stroke: "#243040" });
  if (bars) for (const [x, v] of pts) add("rect", { x: (x - slot / 2 + 0.5).toFixed(1), y: y(v).toFixed(1), width: (slot - 1).toFixed(1), height: (h - 4 - y(v)).toFixed(1), fill: color });
  else if (pts.length) {
    pts.sort((a, b) => a[0] - b[0]);
    add("polyline", { points: pts.map(([x, v]) => x.toFixed(1) + "," + y(v).toFixed(1)).join(" "), fill: "none", stroke: color, "stroke-width": 2 });
    for (const [x, v] of pts) add("circle", { cx: x.toFixed(1), cy: y(v).toFixed(1), r: 2, fill: color });
  }
  // The caption names the figure as the header does, with the hour's
  // figure (the header's) and the last minute's apart: they may differ.
  const last = pts.length ? pts.reduce((a, b) => (a[0] > b[0] ? a : b)) : null;
  const age = last && Math.round((w - last[0]) / slot - 0.5);
  const lastText = last == null ? empty
    : (age ? "its latest minute, " + age + "m ago: " : "this minute: ") + format(last[1]) + unit + " · scale " + format(top) + unit;
  const f = FIGURES[key];
  return el("figure", { class: "chart-box", "data-chart": key, title: f.title },
    el("figcaption", {}, f.label.charAt(0).toUpperCase() + f.label.slice(1),
      hour != null ? el("span", { class: "hour" }, " 1h: " + hour) : null,
      el("div", { class: "muted" }, lastText)), svg);
}

// pendingOf is a minute's attempts delivered and not ended yet: in no
// share, as the API's figures leave them out.
const pendingOf = (x) => Math.max(0, x.delivered - x.succeeded - x.failed - x.timed_out);
const minuteShare = (part, of) => of > 0 ? 100 * part / of : null;

// agentHead is an agent page's header: the lease state and the breaker in
// words, the hour's figures named as everywhere else, and why a HEALTHY
// lease may go with a poor or missing health.
function agentHead(a, m) {
  const note = healthNote(a.state, m);
  return [el("h2", {}, a.agent_id, " ", el("span", { class: "muted" }, "lease "), leasePill(a.state),
    a.hold ? [" ", pill("hold: " + a.hold, "hold")] : null,
    a.paused_until ? [" ", el("span", { class: "pill hold" }, "paused until " + new Date(a.paused_until).toLocaleTimeString())] : null,
    " ", el("span", { class: "muted" }, "breaker "), breakerPill(a.breaker)),
  el("p", { class: "muted figures", id: "agent-figures" }, "namespace " + a.namespace + " · " + (a.mode === "pull" ? "pull agent" : a.protocol + " " + a.endpoint),
    " · ", figure("health", health(m.health_score)), " · ", figure("reach", pct(m.reach_rate)), " · ", figure("success", pct(m.success_rate)),
    " · ", figure("business", pct(m.business_success_rate)), m.pending ? " · " + m.pending + " pending" : "", " (1h)"),
  note ? el("p", { class: "notice", id: "health-note" }, note) : null];
}

function agentView(root, route) {
  const { ns, id } = route;
  const head = el("div", { class: "page-head" });
  const facts = el("dl", { class: "facts" });
  const charts = el("div", { class: "charts" });
  const ops = el("div", { class: "ops", id: "agent-ops" });
  const alerts = el("tbody");
  // The page shows once the agent is known: a missing one gets the
  // not-found view, never live action buttons.
  const page = el("div", { hidden: true }, head,
    el("div", { class: "columns" }, el("section", {}, el("h3", {}, "Facts"), facts), el("section", {}, el("h3", {}, "Operator actions"), ops)),
    el("h3", {}, "The last hour, per minute"), charts,
    el("h3", {}, "Alerts of this agent"), el("table", { id: "agent-alerts" }, el("thead", {}, el("tr", {}, el("th", {}, "When"), el("th", {}, "Alert"), el("th", {}, "Detail"))), alerts));
  root.append(el("p", {}, link(BASE + "/agents" + nsq(ns), "← agents")), page);
  let missing = false;
  const path = "/v1/agents/" + enc(id);
  let agent = null;

  async function act(action, label, text) {
    const c = await confirmAction({ title: label + " " + id + "?", text, ok: label });
    if (!c.ok) return;
    try {
      const r = await api(path + "/" + action + nsq(ns), { method: "POST", body: JSON.stringify(c.reason ? { reason: c.reason } : {}) });
      setStatus(id + " is " + r.state + (r.hold ? " (hold: " + r.hold + ")" : ""));
    } catch (e) { setStatus(label + " " + id + ": " + e.message, true); }
    head.dataset.sig = ""; refresh();
  }
  const weight = el("input", { id: "op-weight", type: "number", min: 1, max: 100 });
  const rollout = el("input", { id: "op-rollout", type: "number", min: 0, max: 100 });
  const settings = el("form", { class: "settings", onsubmit: async (ev) => {
    ev.preventDefault();
    const change = {};
    if (agent && Number(weight.value) !== agent.weight) change.weight = Number(weight.value);
    if (agent && Number(rollout.value) !== agent.rollout_percent) change.rollout_percent = Number(rollout.value);
    if (!Object.keys(change).length) { setStatus("nothing changed"); return; }
    const text = Object.entries(change).map(([k, v]) => k + " " + agent[k] + " → " + v).join(", ") + ": in effect at the next snapshot, recorded as AGENT_UPDATED.";
    const c = await confirmAction({ title: "Change " + id + "?", text, reason: false, ok: "Apply" });
    if (!c.ok) return;
    try {
      const r = await api(path + nsq(ns), { method: "PATCH", body: JSON.stringify(change) });
      setStatus(id + ": weight " + r.weight + ", rollout " + r.rollout_percent + "%");
      weight.dataset.dirty = rollout.dataset.dirty = "";
    } catch (e) { setStatus("update " + id + ": " + e.message, true); }
    head.dataset.sig = ""; refresh();
  } },
  el("label", {}, "Weight (1–100)", weight), el("label", {}, "Rollout % (canary share)", rollout), el("button", { type: "submit", id: "op-apply" }, "Apply…"));
  for (const i of [weight, rollout]) i.addEventListener("input", () => { i.dataset.dirty = "1"; });
  ops.append(
    el("div", { class: "buttons" },
      el("button", { "data-action": "drain", onclick: () => act("drain", "Drain", "No new work goes to " + id + "; what it holds finishes, then the lease sweep takes it OFFLINE.") }, "Drain…"),
      el("button", { "data-action": "down", onclick: () => act("down", "Confirm down", id + " gets no traffic, and heartbeats do not revive it, until it registers again or is brought up.") }, "Confirm down…"),
      el("button", { "data-action": "up", onclick: () => act("up", "Bring up", "Ends the probe window now, or lifts a confirmed down or a drain; the lease still rules.") }, "Bring up…")),
    settings,
    el("p", { class: "links" }, link(BASE + "/jobs?agent_id=" + enc(id) + "&namespace=" + enc(ns), "jobs of this agent"), " · ",
      link(BASE + "/dead?agent_id=" + enc(id) + "&namespace=" + enc(ns), "its dead letters"),
      session.river_ui ? [" · ", el("a", { href: "/riverui/" }, "River UI ↗")] : null));

  return {
    async update() {
      let a, series, al, metrics;
      try {
        [a, series, al, metrics] = await Promise.all([api(path + nsq(ns)), api(path + "/series" + nsq(ns)),
          api("/v1/alerts?namespace=" + enc(ns) + "&subject=" + enc(id) + "&limit=20"), api("/v1/metrics/agents?window=1h&namespace=" + enc(ns))]);
      } catch (e) {
        if (e.status !== 404) throw e;
        if (!missing) notFound(root, "agent", ns + "/" + id, BASE + "/agents" + nsq(ns), "← all agents");
        missing = true;
        return;
      }
      if (missing) { render(); return; } // it registered since: the whole page
      page.hidden = false;
      agent = a;
      const m = metrics.agents.find((x) => x.agent_id === id) || {};
      draw(head, JSON.stringify([a.state, a.hold, a.paused_until, a.breaker, m]), () => agentHead(a, m));
      const rows = [
        ["Capabilities", a.capabilities.join(", ")], ["Aliases", (a.aliases || []).join(", ") || "–"], ["Version", a.version || "–"],
        ["Weight", a.weight], ["Rollout", a.rollout_percent + "%"], ["Max concurrent", a.max_concurrent || "unlimited"],
        ["In flight", a.in_flight + (a.mode === "pull" ? " · inbox " + (a.inbox_depth || 0) : "")],
        ["Lease", "expires " + new Date(a.lease_expires_at).toLocaleTimeString() + ", ttl " + a.ttl_seconds + " s"],
        ["Last heartbeat", ago(a.last_heartbeat_at)], ["State since", ago(a.state_changed_at)],
        ["Breaker", breakerText(a.breaker.state) + ", " + (a.breaker.attempts ? (100 * a.breaker.error_rate).toFixed(0) + "% errors over " + a.breaker.attempts + " attempts" : "no attempts") + " in its window"],
        ["Routed (1h)", a.recent ? a.recent.routed + " routed, " + a.recent.attempted + " attempted" : "–"],
      ];
      if (a.recent_restarts >= 3) rows.push(["Flapping", a.recent_restarts + " restarts in the hour, " + a.probes_needed + " probes to pass"]);
      draw(facts, JSON.stringify(rows), () => rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))]));
      if (!weight.dataset.dirty) weight.value = a.weight;
      if (!rollout.dataset.dirty) rollout.value = a.rollout_percent;
      const mins = series.minutes;
      const share = { unit: "%", max: 100, format: (v) => v.toFixed(0) };
      draw(charts, JSON.stringify([mins, m]), () => [
        chart("attempts", mins, (x) => x.attempted, { bars: true, color: "var(--accent)", hour: m.attempted ?? "—" }),
        chart("reach", mins, (x) => minuteShare(x.delivered, x.attempted), { ...share, color: "var(--info)", hour: pct(m.reach_rate) }),
        chart("success", mins, (x) => minuteShare(x.succeeded, x.attempted - pendingOf(x)), { ...share, color: "var(--ok)", hour: pct(m.success_rate) }),
        chart("business", mins, (x) => minuteShare(x.succeeded, x.succeeded + x.failed + x.timed_out), { ...share, color: "var(--accent)", hour: pct(m.business_success_rate), empty: "no answered attempt in the hour" }),
        chart("latency", mins, (x) => x.latency_p95_ms, { unit: " ms", color: "var(--warn)", format: (v) => v.toFixed(1), hour: ms(m.latency_p95_ms), empty: "no result in the hour" })]);
      draw(alerts, JSON.stringify(al.alerts), () => al.alerts.length ? al.alerts.map((x) => alertRow(x, false))
        : [el("tr", {}, el("td", { colspan: 3, class: "empty" }, "No alerts for this agent."))]);
    },
  };
}

// ---- jobs ---------------------------------------------------------------

const jobHref = (id) => BASE + "/jobs/" + enc(id);
const statuses = ["SUBMITTED", "AWAITING_APPROVAL", "DELIVERED", "AWAITING_INPUT", "TIMEOUT", "SUCCESS", "FAILED", "DEAD_LETTER", "CANCELLED", "REJECTED"];

// filters makes the toolbar inputs of a list, each bound to a query
// parameter of the address.
function filters(defs) {
  const q = query();
  return defs.map(([key, label, options]) => {
    const input = options
      ? el("select", { id: "f-" + key, "aria-label": label }, el("option", { value: "" }, label), ...options.map((o) => el("option", { selected: q.get(key) === o }, o)))
      : el("input", { id: "f-" + key, placeholder: label, value: q.get(key) || "" });
    // A changed filter starts again from the first page.
    input.addEventListener(options ? "change" : "input", () => { setQuery({ [key]: input.value, cursor: "" }); refresh(); });
    return input;
  });
}
const listQuery = (keys, extra = {}) => {
  const q = new URLSearchParams(extra);
  for (const k of keys) if (query().get(k)) q.set(k, query().get(k));
  return q;
};

// The jobs view searches as GET /v1/jobs does: q is a job id or trace id
// prefix when it looks like one (hex digits and dashes, at least four),
// else text of the job's error, which needs a time range. The address
// keeps since as the range chosen ("1h", "24h", "7d", so a bookmark means
// "the last day" whenever it is opened) or as an RFC 3339 time.
const RANGES = { "1h": 3600e3, "24h": 86400e3, "7d": 7 * 86400e3 };
const TEXT_RANGE = "7d"; // a text search over "any time" searches this far back
const looksLikeID = (q) => /^[0-9a-fA-F-]+$/.test(q) && q.replace(/-/g, "").length >= 4 && q.replace(/-/g, "").length <= 32;
const sinceOf = (v) => RANGES[v] ? new Date(Date.now() - RANGES[v]).toISOString() : v || "";
const textSearch = () => !!query().get("q") && !looksLikeID(query().get("q").trim());

// jobsQuery is the API query of the jobs view's address.
function jobsQuery() {
  const q = listQuery(["status", "capability", "agent_id", "namespace", "via", "q", "trace_id", "until", "cursor"], { limit: query().get("limit") || "50" });
  const since = sinceOf(query().get("since")) || (textSearch() ? sinceOf(TEXT_RANGE) : "");
  if (since) q.set("since", since);
  return q;
}

function rangeSelect() {
  const cur = query().get("since") || "";
  const opts = [["", "any time"], ["1h", "last 1 h"], ["24h", "last 24 h"], ["7d", "last 7 d"]];
  if (cur && !RANGES[cur]) opts.push([cur, "since " + (isNaN(new Date(cur)) ? cur : new Date(cur).toLocaleString())]);
  const sel = el("select", { id: "f-since", "aria-label": "submitted in", title: "when the jobs were submitted" },
    ...opts.map(([v, label]) => el("option", { value: v, selected: v === cur }, label)));
  sel.addEventListener("change", () => { setQuery({ since: sel.value, cursor: "" }); refresh(); });
  return sel;
}

function searchBox() {
  const box = el("input", { id: "f-q", type: "search", size: 36, value: query().get("q") || "",
    placeholder: "search: job id, trace id, or error text", title: "a job id or trace id (or their first hex digits), or text in the job's error" });
  let timer = 0;
  box.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { setQuery({ q: box.value.trim(), cursor: "" }); refresh(); }, 250);
  });
  return box;
}

function jobsView(root) {
  const tbody = el("tbody");
  const note = el("p", { class: "muted", id: "jobs-note" });
  const error = el("p", { class: "error", id: "jobs-error", role: "alert", hidden: true });
  const first = el("button", { id: "page-first", onclick: () => { setQuery({ cursor: "" }); refresh(); } }, "« first page");
  const next = el("button", { id: "page-next" }, "next page »");
  const count = el("span", { class: "muted", id: "jobs-count" });
  let nextCursor = "";
  next.addEventListener("click", () => { if (nextCursor) { setQuery({ cursor: nextCursor }); refresh(); } });
  root.append(el("div", { class: "toolbar" }, searchBox(), rangeSelect(),
    ...filters([["status", "any status", statuses], ["capability", "capability"], ["agent_id", "agent"], ["namespace", "namespace"], ["via", "any face", ["rest", "a2a", "mcp"]]])),
  error, el("table", { id: "jobs-table" }, el("thead", {}, el("tr", {}, ...["Job", "Status", "Capability", "Agent", "Attempts", "Trace", "Error", "Submitted"].map((h) => el("th", {}, h)))), tbody),
  el("div", { class: "toolbar pager" }, first, next, count), note);
  return {
    async update() {
      let list;
      try {
        list = await api("/v1/jobs?" + jobsQuery());
      } catch (e) {
        if (e.status !== 400) throw e;
        error.hidden = false;
        error.textContent = "The search was refused: " + e.message;
        draw(tbody, "refused", () => [el("tr", {}, el("td", { colspan: 8, class: "empty" }, "No results: change the search above."))]);
        nextCursor = ""; next.disabled = true; first.disabled = !query().get("cursor"); count.textContent = ""; note.textContent = "";
        return;
      }
      error.hidden = true;
      nextCursor = list.next_cursor || "";
      next.disabled = !nextCursor;
      first.disabled = !query().get("cursor");
      const searched = query().get("q") || query().get("trace_id") || query().get("since") || query().get("until");
      count.textContent = list.jobs.length + (list.jobs.length === 1 ? " job" : " jobs") + (query().get("cursor") ? " on this page" : "") + (nextCursor ? ", more on the next page" : "");
      note.textContent = textSearch() && !query().get("since") ? "A search of error text needs a time range: it covers jobs submitted in the last 7 days (choose a range to change it)."
        : query().get("until") ? "Submitted before " + new Date(query().get("until")).toLocaleString() + "." : "";
      draw(tbody, JSON.stringify(list.jobs), () => list.jobs.length ? list.jobs.map((j) => el("tr", { "data-job": j.job_id },
        el("td", {}, link(jobHref(j.job_id), el("code", {}, j.job_id))), el("td", {}, pill(j.status)),
        el("td", {}, j.capability, j.via && j.via !== "rest" ? el("span", { class: "pill via", title: "submitted through the " + j.via.toUpperCase() + " face" }, " via " + j.via.toUpperCase()) : null),
        el("td", {}, j.agent_id ? link(agentHref(j.namespace, j.agent_id), j.agent_id) : "–"), el("td", {}, j.attempts + " / " + j.max_attempts),
        el("td", {}, j.trace_id ? el("code", { title: j.trace_id }, shorten(j.trace_id, 8)) : "–"),
        el("td", { class: "err" }, j.error ? shorten(j.error, 80) : "–"),
        el("td", { title: new Date(j.submitted_at).toLocaleString() }, ago(j.submitted_at))))
        : [el("tr", {}, el("td", { colspan: 8, class: "empty" }, searched ? "No job matches this search." : location.search ? "No job matches these filters." : "No jobs yet."))]);
    },
  };
}

// attemptOf is the job attempt an event belongs to: its data's attempt,
// except for callbacks, whose attempt counts the callback's tries.
function attemptOf(e) {
  if (e.type.startsWith("CALLBACK_")) return "callback";
  return e.data && typeof e.data.attempt === "number" ? e.data.attempt : null;
}

// groupEvents splits a job's events into the submission, one group per
// attempt (from its ROUTED), the outcome and the callback.
function groupEvents(events) {
  const groups = [{ key: "submitted", title: "Submission", events: [] }];
  const byAttempt = {};
  let last = groups[0];
  for (const e of events) {
    const a = attemptOf(e);
    let g;
    if (e.type === "ROUTED") {
      g = { key: "attempt-" + e.data.attempt, attempt: e.data.attempt, agent: e.data.agent_id, title: "Attempt " + e.data.attempt, events: [] };
      byAttempt[e.data.attempt] = g; groups.push(g);
    } else if (a === "callback") {
      g = groups.find((x) => x.key === "callback");
      if (!g) { g = { key: "callback", title: "Callback to the caller", events: [] }; groups.push(g); }
    } else if (a != null && byAttempt[a]) g = byAttempt[a];
    else if (["DEAD_LETTER", "CANCELLED", "REJECTED"].includes(e.type) || (a == null && last.attempt)) {
      g = groups.find((x) => x.key === "outcome");
      if (!g) { g = { key: "outcome", title: "Outcome", events: [] }; groups.push(g); }
    } else g = last.key === "callback" || last.key === "outcome" ? groups[0] : last;
    g.events.push(e);
    if (g.key !== "callback") last = g;
  }
  return groups.filter((g) => g.events.length);
}

// summary says in a few words what an event means.
function summary(e) {
  const d = e.data || {};
  switch (e.type) {
    case "SUBMITTED": return d.capability + ", " + d.priority + " priority, up to " + d.max_attempts + " attempts of " + ms(d.timeout_ms) + (d.hint ? ", hint “" + d.hint + "”" : "");
    case "ROUTED": return d.agent_id ? "to " + d.agent_id + (d.route && d.route.canary ? " (canary)" : "") : "to no agent";
    case "DELIVERED": return d.claimed ? "claimed from the inbox after " + ms(d.latency_ms) : (d.async ? "accepted" : "answered inline") +
      (d.http_status ? ", HTTP " + d.http_status : "") + " in " + ms(d.latency_ms) + ", deadline " + clock(d.deadline);
    case "ATTEMPT_FAILED": return d.reason + (d.retry_at ? ", retry at " + clock(d.retry_at) : "");
    case "TIMEOUT": return "no result by the deadline " + clock(d.deadline) + (d.retry_at ? ", retry at " + clock(d.retry_at) : "");
    case "SUCCESS": case "FAILED": return (d.biz_code ? "biz_code " + d.biz_code + ", " : "") + "time to result " + ms(d.latency_ms);
    case "DEAD_LETTER": return "after " + d.attempts + " attempts: " + d.reason;
    case "CALLBACK_DELIVERED": case "CALLBACK_FAILED": return "try " + d.attempt + (d.status_code ? ", HTTP " + d.status_code : "") + (d.error ? ": " + d.error : "");
    case "RESULT_DUPLICATE": return d.reason + " result (" + d.status + ") changed nothing";
  }
  return d.reason || "";
}

// answerOf says what the agent answered an attempt, as Svix and Convoy show
// a webhook delivery: the HTTP status, the round trip, the first bytes of
// the body, or the error.
function answerOf(g) {
  const find = (t) => g.events.find((e) => e.type === t);
  const delivered = find("DELIVERED"), failed = find("ATTEMPT_FAILED"), outcome = find("SUCCESS") || find("FAILED"), timeout = find("TIMEOUT");
  if (!g.agent) return null;
  let status = null, latency = null, body = null, error = null;
  if (delivered) { status = delivered.data.http_status || null; latency = delivered.data.latency_ms; }
  if (failed) {
    status = failed.data.http_status || (/^http_(\d+)$/.exec(failed.data.reason) || [])[1] || status;
    latency = failed.data.latency_ms ?? latency;
    if (failed.data.body) { body = failed.data.body; error = failed.data.error; } else if (status) body = failed.data.error; else error = failed.data.reason + (failed.data.error ? ": " + failed.data.error : "");
  }
  if (outcome && outcome.data.result !== undefined) body = JSON.stringify(outcome.data.result);
  if (timeout && !failed) error = "no result by the deadline";
  if (delivered && delivered.data.claimed) return el("div", { class: "answer" }, el("strong", {}, "Claimed"), " by the pull agent after " + ms(delivered.data.latency_ms) + " in its inbox",
    body ? el("pre", { class: "body" }, shorten(body, 300)) : null);
  if (status == null && latency == null && error == null && body == null) return el("div", { class: "answer muted" }, "No answer recorded yet.");
  const ok = status && status < 300 && !error;
  return el("div", { class: "answer " + (ok ? "ok" : "bad") },
    el("span", { class: "http " + (ok ? "ok" : "bad") }, status ? "HTTP " + status : "no HTTP answer"),
    latency != null ? " in " + ms(latency) : "", delivered && delivered.data.async ? " · result posted later" : "",
    error ? el("div", { class: "error" }, error) : null,
    body ? el("pre", { class: "body", title: "the first bytes of the answer" }, shorten(body, 300)) : null);
}

function routeTable(e, job) {
  const route = e.data.route;
  if (!route) return null;
  const cands = route.candidates || [], rejected = route.rejected || [];
  const t = el("table", { class: "route" }, el("tr", {}, el("th", {}, "candidate"), el("th", {}, "score"), el("th", {}, "terms")));
  for (const c of cands) {
    const chosen = c.agent_id === route.chosen;
    t.append(el("tr", {}, el("td", { class: chosen ? "chosen" : "" }, c.agent_id + (chosen ? " ✓" : "")), el("td", {}, c.score.toFixed(1)),
      el("td", {}, c.terms.filter((x) => x.value !== 0).map((x) => x.name + " " + (x.value > 0 ? "+" : "") + x.value.toFixed(1)).join(", "))));
  }
  for (const r of rejected) t.append(el("tr", {}, el("td", { class: "muted" }, r.agent_id), el("td", {}, "–"), el("td", { class: "muted" }, "rejected: " + r.reason)));
  let why = null;
  if (!cands.length) {
    why = el("p", { class: "why", "data-why": "no-candidates" }, rejected.length
      ? "No candidate: every agent of namespace " + job.namespace + " offering " + job.capability + " was ruled out, for the reasons below."
      : "No candidate: no agent of namespace " + job.namespace + " offers " + job.capability + ", so there was nothing to rank. Register one, or check the capability's spelling.");
  }
  return el("div", { class: "routing" }, why, cands.length || rejected.length ? t : null,
    route.policy_version ? el("p", { class: "muted" }, "routing policy v" + route.policy_version) : null);
}

function timeline(events, job) {
  const out = [];
  let prev = null;
  for (const g of groupEvents(events)) {
    const first = g.events[0], lastEv = g.events[g.events.length - 1];
    const took = new Date(lastEv.recorded_at) - new Date(first.recorded_at);
    const title = g.attempt ? [g.title + " → ", g.agent ? link(agentHref(job.namespace, g.agent), g.agent) : "no agent"] : [g.title];
    const items = g.events.map((e) => {
      const gap = prev ? new Date(e.recorded_at) - new Date(prev.recorded_at) : null;
      prev = e;
      const data = Object.assign({}, e.data);
      return el("li", { "data-type": e.type },
        el("div", { class: "line" }, pill(e.type, "ev " + e.type), " ", el("span", { class: "what" }, summary(e)),
          el("span", { class: "t" }, clock(e.recorded_at), gap != null ? el("span", { class: "gap", title: "time since the step before" }, " " + span(gap)) : null, " · v" + e.version)),
        e.type === "ROUTED" ? routeTable(e, job) : null,
        el("details", { class: "raw" }, el("summary", {}, "raw event"), el("pre", {}, JSON.stringify({ data, metadata: e.metadata }, null, 1))));
    });
    out.push(el("section", { class: "group", "data-group": g.key },
      el("h3", {}, ...title, el("span", { class: "muted" }, " · " + g.events.length + (g.events.length === 1 ? " event" : " events") + (g.events.length > 1 ? " over " + span(took).slice(1) : ""))),
      g.attempt ? answerOf(g) : null, el("ol", { class: "timeline" }, items)));
  }
  return out;
}

function jobView(root, route) {
  const id = route.id;
  const head = el("div", { class: "page-head", id: "job-head" });
  const body = el("div", { id: "timeline" });
  root.append(el("p", {}, link(BASE + "/jobs", "← jobs")), head, body);
  let missing = false;
  return {
    async update() {
      let job, evs;
      try {
        [job, evs] = await Promise.all([api("/v1/jobs/" + enc(id)), api("/v1/jobs/" + enc(id) + "/events")]);
      } catch (e) {
        if (e.status !== 404) throw e;
        if (!missing) notFound(root, "job", id, BASE + "/jobs", "← all jobs");
        missing = true;
        return;
      }
      if (missing) { render(); return; }
      const terminal = ["SUCCESS", "FAILED", "DEAD_LETTER", "CANCELLED", "REJECTED"].includes(job.status);
      draw(head, JSON.stringify(job), () => [
        el("h2", {}, pill(job.status), " ", job.capability),
        el("p", { class: "muted", id: "job-meta" }, "job ", el("code", {}, job.job_id), " · namespace " + job.namespace + " · trace ", link(BASE + "/jobs?trace_id=" + enc(job.trace_id), el("code", { title: "the jobs of this trace" }, job.trace_id)),
          " · attempt " + job.attempts + " of " + job.max_attempts, job.via && job.via !== "rest" ? el("span", { class: "pill via", id: "job-via", title: "submitted through the " + job.via.toUpperCase() + " face" }, " via " + job.via.toUpperCase()) : null, job.replay_of ? [" · replay of ", link(jobHref(job.replay_of), job.replay_of)] : null,
          job.agent_id ? [" · agent ", link(agentHref(job.namespace, job.agent_id), job.agent_id)] : null),
        job.error ? el("p", { class: "error" }, job.error) : null,
        job.waiting ? el("p", { class: "waiting", id: "job-waiting", title: "why the router cannot take it now (" + job.waiting.code + ")" }, "Waiting: " + job.waiting.message) : null,
        el("div", { class: "buttons" },
          job.status === "DEAD_LETTER" ? el("button", { class: "replay", onclick: async () => {
            const c = await confirmAction({ title: "Replay this job?", text: "Submits it again as a new job with replay_of " + job.job_id + ".", reason: false, ok: "Replay" });
            if (!c.ok) return;
            try { const r = await api("/v1/jobs/" + enc(id) + "/replay", { method: "POST" }); setStatus("replayed as " + r.job_id); go(jobHref(r.job_id)); } catch (e) { setStatus(e.message, true); }
          } }, "Replay…") : null,
          !terminal ? el("button", { class: "cancel", onclick: async () => {
            const c = await confirmAction({ title: "Cancel this job?", text: "It ends CANCELLED; an agent holding it is told so." , ok: "Cancel the job" });
            if (!c.ok) return;
            try { await api("/v1/jobs/" + enc(id) + "/cancel", { method: "POST", body: JSON.stringify(c.reason ? { reason: c.reason } : {}) }); refresh(); } catch (e) { setStatus(e.message, true); }
          } }, "Cancel…") : null)]);
      draw(body, evs.events.length + ":" + evs.events.map((e) => e.version).join(","), () => timeline(evs.events, job));
    },
  };
}

// ---- dead letters -------------------------------------------------------

function deadView(root) {
  const tbody = el("tbody");
  const all = el("input", { type: "checkbox", id: "dead-all", "aria-label": "select every row" });
  const selected = new Set();
  const count = el("span", { class: "muted" });
  const replaySel = el("button", { id: "replay-selected", disabled: true }, "Replay selected");
  const replayAll = el("button", { id: "replay-filter" }, "Replay all matching…");
  const deadQuery = () => listQuery(["capability", "agent_id", "namespace"], { status: "DEAD_LETTER" });
  let shown = [];
  const sync = () => {
    replaySel.disabled = selected.size === 0;
    replaySel.textContent = "Replay selected (" + selected.size + ")…";
    all.checked = shown.length > 0 && shown.every((j) => selected.has(j.job_id));
  };
  async function replay(ids, what) {
    const c = await confirmAction({ title: "Replay " + ids.length + " dead letter" + (ids.length === 1 ? "" : "s") + "?",
      text: "Each is submitted again as a new job with replay_of its id (" + what + ").", reason: false, ok: "Replay " + ids.length });
    if (!c.ok) return;
    let done = 0, failed = 0;
    for (const id of ids) {
      try { await api("/v1/jobs/" + enc(id) + "/replay", { method: "POST" }); done++; } catch (e) { failed++; }
      setStatus("replayed " + done + " of " + ids.length + (failed ? ", " + failed + " refused" : ""), failed > 0);
    }
    selected.clear(); tbody.dataset.sig = ""; refresh();
  }
  replaySel.addEventListener("click", () => replay([...selected], "the rows selected"));
  replayAll.addEventListener("click", async () => {
    const ids = [];
    let cursor = "";
    do {
      const q = deadQuery(); q.set("limit", "500"); if (cursor) q.set("cursor", cursor);
      const page = await api("/v1/jobs?" + q);
      ids.push(...page.jobs.map((j) => j.job_id));
      cursor = page.next_cursor || "";
    } while (cursor && ids.length < 5000);
    if (!ids.length) { setStatus("no dead letter matches these filters"); return; }
    replay(ids, location.search ? "every dead letter matching the filters" : "every dead letter");
  });
  all.addEventListener("change", () => { for (const j of shown) all.checked ? selected.add(j.job_id) : selected.delete(j.job_id); tbody.dataset.sig = ""; sync(); refresh(); });
  root.append(el("div", { class: "toolbar" }, ...filters([["capability", "capability"], ["agent_id", "agent"], ["namespace", "namespace"]]), replaySel, replayAll, count),
    el("table", { id: "dead-table" }, el("thead", {}, el("tr", {}, el("th", {}, all), ...["Job", "Capability", "Agent", "Attempts", "Last error", "Finished"].map((h) => el("th", {}, h)))), tbody));
  sync();
  return {
    async update() {
      const list = await api("/v1/jobs?" + deadQuery() + "&limit=100");
      shown = list.jobs;
      for (const id of [...selected]) if (!shown.some((j) => j.job_id === id)) selected.delete(id);
      count.textContent = list.jobs.length + (list.next_cursor ? "+" : "") + " dead letter" + (list.jobs.length === 1 ? "" : "s");
      draw(tbody, JSON.stringify([list.jobs, [...selected]]), () => list.jobs.length ? list.jobs.map((j) => el("tr", { "data-job": j.job_id },
        el("td", {}, el("input", { type: "checkbox", class: "pick", "aria-label": "select " + j.job_id, checked: selected.has(j.job_id),
          onchange: (ev) => { ev.target.checked ? selected.add(j.job_id) : selected.delete(j.job_id); sync(); } })),
        el("td", {}, link(jobHref(j.job_id), el("code", {}, shorten(j.job_id, 13)))), el("td", {}, j.capability),
        el("td", { class: "agent" }, j.agent_id ? link(agentHref(j.namespace, j.agent_id), j.agent_id) : el("span", { class: "muted" }, "no agent")),
        el("td", {}, j.attempts + " / " + j.max_attempts), el("td", { class: "err" }, shorten(j.error || "–", 90)), el("td", {}, ago(j.finished_at))))
        : [el("tr", {}, el("td", { colspan: 7, class: "empty" }, location.search ? "No dead letter matches these filters." : "No dead letters: every job so far found an agent that took it."))]);
      sync();
    },
  };
}

// ---- alerts -------------------------------------------------------------

const alertGroups = { "": "every kind", health: "HEALTH_DEGRADED,HEALTH_RECOVERED", breaker: "BREAKER_OPENED,BREAKER_CLOSED",
  preservation: "SELF_PRESERVATION,SELF_PRESERVATION_ENDED", queue: "QUEUE_HIGH,QUEUE_NORMAL" };

function alertDetail(a) {
  const d = a.data || {};
  switch (a.kind) {
    case "HEALTH_DEGRADED": case "HEALTH_RECOVERED": return "reached " + pct(d.reach_rate) + ", answered OK of attempts " + pct(d.success_rate) + " over " + d.attempted + " attempts (" + d.window + ")";
    case "BREAKER_OPENED": case "BREAKER_CLOSED": return (d.error_rate != null ? (100 * d.error_rate).toFixed(0) + "% errors" : "") + (d.attempts != null ? " over " + d.attempts + " attempts" : "");
    case "SELF_PRESERVATION": return (d.lapsing != null ? d.lapsing + " of " + d.agents + " agents lapsed at once" : "agents lapsed at once") + ": kept from going DOWN";
    case "SELF_PRESERVATION_ENDED": return "ended: " + (d.reason || "") + (d.duration_ms ? " after " + ms(d.duration_ms) : "");
    case "QUEUE_HIGH": case "QUEUE_NORMAL": return Object.entries(d).filter(([k]) => k !== "namespace").map(([k, v]) => k + " " + json(v)).join(", ");
  }
  return JSON.stringify(d);
}
const agentAlert = (k) => k.startsWith("HEALTH_") || k.startsWith("BREAKER_");
const badAlert = (k) => ["HEALTH_DEGRADED", "BREAKER_OPENED", "SELF_PRESERVATION", "QUEUE_HIGH"].includes(k);

function alertRow(a, withSubject = true) {
  return el("tr", { "data-kind": a.kind },
    el("td", {}, new Date(a.recorded_at).toLocaleString(), el("div", { class: "muted" }, ago(a.recorded_at))),
    el("td", {}, pill(a.kind, badAlert(a.kind) ? "alert-bad" : "alert-ok")),
    withSubject ? el("td", {}, a.namespace) : null,
    withSubject ? el("td", {}, agentAlert(a.kind) ? link(agentHref(a.namespace, a.subject), a.subject) : a.subject) : null,
    el("td", {}, alertDetail(a)));
}

function alertsView(root) {
  const kind = el("select", { id: "f-kind", "aria-label": "kind" }, ...Object.entries({ "": "every kind", health: "health", breaker: "breaker", preservation: "self-preservation", queue: "queue watermarks" })
    .map(([v, label]) => el("option", { value: v, selected: (query().get("kind") || "") === v }, label)));
  kind.addEventListener("change", () => { setQuery({ kind: kind.value }); refresh(); });
  const tbody = el("tbody");
  root.append(el("div", { class: "toolbar" }, kind, ...filters([["namespace", "namespace"], ["subject", "agent, namespace or lane"]])),
    el("table", { id: "alerts-table" }, el("thead", {}, el("tr", {}, ...["When", "Alert", "Namespace", "Subject", "Detail"].map((h) => el("th", {}, h)))), tbody));
  return {
    async update() {
      const q = listQuery(["namespace", "subject"], { limit: "200" });
      const k = alertGroups[query().get("kind") || ""];
      if (query().get("kind") && k) q.set("kind", k);
      const list = await api("/v1/alerts?" + q);
      draw(tbody, JSON.stringify(list.alerts), () => list.alerts.length ? list.alerts.map((a) => alertRow(a))
        : [el("tr", {}, el("td", { colspan: 5, class: "empty" }, "No alerts" + (location.search ? " match these filters." : " yet: health and breaker turns, self-preservation and queue watermarks show here as they happen.")))]);
    },
  };
}

function missingView(root) {
  root.append(el("p", { class: "empty" }, "Nothing here. ", link(BASE + "/agents", "Go to the agents.")));
  return { async update() {} };
}

// ---- start --------------------------------------------------------------

localStorage.removeItem("agentreach.key"); // an older dashboard kept the key itself here
(async () => {
  try { if (await checkSession()) render(); } catch (e) { setStatus(e.message, true); }
  setInterval(refresh, 2000);
})();
