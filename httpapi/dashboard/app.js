// Agent-Reach dashboard: plain JavaScript over the public API, refreshed
// every two seconds. The key entered is kept in localStorage and sent as a
// bearer token; without one it works only when authentication is off.
"use strict";
const $ = (s) => document.querySelector(s);
let key = localStorage.getItem("agentreach.key") || "";
let openJob = null;

async function api(path, opts = {}) {
  const headers = Object.assign({ "Content-Type": "application/json" }, opts.headers || {});
  if (key) headers.Authorization = "Bearer " + key;
  const res = await fetch(path, Object.assign({}, opts, { headers }));
  const body = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) throw new Error((body && body.error && body.error.message) || res.statusText);
  return body;
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children.flat()) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}
const pill = (v) => el("span", { class: "pill " + v }, v);
const pct = (v) => v == null ? "–" : (100 * v).toFixed(1) + "%";
const ago = (t) => { if (!t) return "–"; const s = (Date.now() - new Date(t)) / 1000; return s < 60 ? s.toFixed(0) + "s ago" : s < 3600 ? (s / 60).toFixed(0) + "m ago" : (s / 3600).toFixed(1) + "h ago"; };
function bar(v) {
  const b = el("span", { class: "bar" }); const i = el("i"); i.style.width = v == null ? "0" : Math.round(100 * v) + "%";
  if (v != null && v < 0.95) i.style.background = v < 0.8 ? "var(--bad)" : "var(--warn)"; b.append(i); return b;
}
// spark draws the last hour as 60 one-minute bars: height is attempts,
// green the share that succeeded, red the rest.
function spark(points) {
  const w = 120, h = 24, ns = "http://www.w3.org/2000/svg", slot = w / 60;
  const svg = document.createElementNS(ns, "svg"); svg.setAttribute("width", w); svg.setAttribute("height", h); svg.setAttribute("class", "spark");
  const base = document.createElementNS(ns, "rect"); base.setAttribute("x", 0); base.setAttribute("y", h - 1); base.setAttribute("width", w);
  base.setAttribute("height", 1); base.setAttribute("fill", "#243040"); svg.append(base);
  if (!points || points.length === 0) return svg;
  const now = Date.now(), max = Math.max(1, ...points.map((p) => p.attempted));
  const rect = (x, y, height, color) => {
    const r = document.createElementNS(ns, "rect"); r.setAttribute("x", x.toFixed(1)); r.setAttribute("y", y.toFixed(1));
    r.setAttribute("width", Math.max(1, slot - 0.5).toFixed(1)); r.setAttribute("height", height.toFixed(1)); r.setAttribute("fill", color); svg.append(r);
  };
  for (const p of points) {
    const age = Math.floor((now - new Date(p.minute)) / 60000);
    if (age < 0 || age >= 60 || p.attempted === 0) continue;
    const x = w - (age + 1) * slot, total = Math.max(2, (p.attempted / max) * (h - 2)), ok = total * (p.succeeded / p.attempted);
    rect(x, h - 1 - total, total - ok, "#f0555a");
    rect(x, h - 1 - ok, ok, "#2fbf71");
  }
  const title = document.createElementNS(ns, "title");
  title.textContent = points.reduce((a, p) => a + p.attempted, 0) + " attempts in the last hour"; svg.append(title);
  return svg;
}

// operatorButton drains, confirms down or brings up an agent, with the
// operator's reason, through the same API (and scopes) as the CLI.
function operatorButton(a, action) {
  return el("button", { class: "op", "data-action": action, title: action + " " + a.agent_id, onclick: async () => {
    const reason = window.prompt(action + " " + a.agent_id + ": reason (recorded on the agent's stream)", "");
    if (reason === null) return;
    try {
      const path = "/v1/agents/" + encodeURIComponent(a.agent_id) + "/" + action + "?namespace=" + encodeURIComponent(a.namespace);
      const r = await api(path, { method: "POST", body: JSON.stringify({ reason }) });
      setStatus(a.agent_id + " is " + r.state + (r.hold ? " (hold: " + r.hold + ")" : ""));
      loadAgents();
    } catch (e) { setStatus(e.message); }
  } }, action);
}

// weightButton changes an agent's routing weight at run time (PATCH, no
// restart), recorded as AGENT_UPDATED.
function weightButton(a) {
  return el("button", { class: "op", "data-action": "weight", title: "change the weight of " + a.agent_id, onclick: async () => {
    const w = window.prompt("weight of " + a.agent_id + " (1-100)", String(a.weight));
    if (w === null) return;
    try {
      const path = "/v1/agents/" + encodeURIComponent(a.agent_id) + "?namespace=" + encodeURIComponent(a.namespace);
      const r = await api(path, { method: "PATCH", body: JSON.stringify({ weight: Number(w) }) });
      setStatus(a.agent_id + " weighs " + r.weight);
      loadAgents();
    } catch (e) { setStatus(e.message); }
  } }, "weight " + a.weight);
}

async function loadAgents() {
  const win = $("#window").value;
  const [agents, metrics, series] = await Promise.all([api("/v1/agents"), api("/v1/metrics/agents?window=" + win), api("/v1/metrics/agents/series")]);
  const byAgent = Object.fromEntries(metrics.agents.map((m) => [m.agent_id, m]));
  const points = {};
  for (const p of series.points) (points[p.agent_id] = points[p.agent_id] || []).push(p);
  const rows = agents.agents.map((a) => {
    const m = byAgent[a.agent_id] || {};
    return el("tr", { "data-agent": a.agent_id },
      el("td", {}, el("strong", {}, a.agent_id), a.mode === "pull" ? [" ", el("span", { class: "pill pull", title: "pull agent: claims its work, no endpoint" }, "pull")] : null,
        el("div", { class: "muted" }, a.capabilities.join(", "))),
      el("td", {}, pill(a.state)),
      el("td", {}, bar(m.health_score), m.health_score == null ? "–" : m.health_score.toFixed(2)),
      el("td", {}, pct(m.reach_rate)), el("td", {}, pct(m.success_rate)),
      el("td", {}, m.latency_p50_ms == null ? "–" : m.latency_p50_ms.toFixed(1) + " / " + m.latency_p95_ms.toFixed(1)),
      el("td", {}, pill(a.breaker.state)), el("td", {}, a.in_flight + (a.max_concurrent ? " / " + a.max_concurrent : ""),
        a.mode === "pull" ? el("div", { class: "muted inbox", title: "attempts waiting to be claimed" }, "inbox " + (a.inbox_depth || 0)) : null),
      el("td", {}, ago(a.last_heartbeat_at)), el("td", {}, spark(points[a.agent_id])),
      el("td", {}, ...["drain", "down", "up"].map((action) => operatorButton(a, action)), weightButton(a)));
  });
  $("#agents-table tbody").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 11, class: "muted" }, "No agents registered yet."))]));
  const sp = agents.self_preservation || [];
  $("#self-preservation").hidden = sp.length === 0;
  $("#self-preservation").textContent = sp.map((p) => "Self-preservation in " + p.namespace + ": " + p.lapsing + " of " + p.agents +
    " agents lapsed at once and are kept from going DOWN (since " + new Date(p.since).toLocaleTimeString() + ", until " +
    new Date(p.until).toLocaleTimeString() + " at the latest).").join(" ");
  $("#agents-updated").textContent = "updated " + new Date().toLocaleTimeString();
}

function jobRow(j, replay) {
  const tr = el("tr", { "data-job": j.job_id, onclick: () => showJob(j.job_id) },
    el("td", {}, el("code", {}, j.job_id.slice(0, 18) + "…")),
    replay ? null : el("td", {}, pill(j.status)),
    el("td", {}, j.capability), replay ? null : el("td", {}, j.agent_id || "–"),
    el("td", {}, j.attempts + " / " + j.max_attempts),
    replay ? el("td", {}, j.error || "–") : null,
    el("td", {}, ago(replay ? j.finished_at : j.submitted_at)));
  if (replay) {
    tr.append(el("td", {}, el("button", { class: "replay", onclick: async (ev) => {
      ev.stopPropagation();
      try { const r = await api("/v1/jobs/" + j.job_id + "/replay", { method: "POST" }); setStatus("replayed as " + r.job_id); showJob(j.job_id); }
      catch (e) { setStatus(e.message); }
    } }, "Replay")));
  } else tr.append(el("td"));
  return tr;
}

// Tables are redrawn only when their rows change, so a row being clicked
// is not replaced under the pointer.
const drawn = {};
function draw(table, rows, sig) {
  if (drawn[table] === sig) return;
  drawn[table] = sig;
  $(table + " tbody").replaceChildren(...rows());
}

async function loadJobs() {
  const q = new URLSearchParams({ limit: "100" });
  for (const [id, k] of [["#f-status", "status"], ["#f-capability", "capability"], ["#f-agent", "agent_id"]]) if ($(id).value) q.set(k, $(id).value);
  const list = await api("/v1/jobs?" + q);
  draw("#jobs-table", () => list.jobs.map((j) => jobRow(j, false)), JSON.stringify(list.jobs));
}

async function loadDead() {
  const list = await api("/v1/jobs?status=DEAD_LETTER&limit=100");
  draw("#dead-table", () => list.jobs.map((j) => jobRow(j, true)), JSON.stringify(list.jobs));
}

function routeTable(route) {
  if (!route || !route.candidates) return null;
  const t = el("table", { class: "route" }, el("tr", {}, el("th", {}, "candidate"), el("th", {}, "score"), el("th", {}, "terms")));
  for (const c of route.candidates) {
    t.append(el("tr", {}, el("td", { class: c.agent_id === route.chosen ? "chosen" : "" }, c.agent_id + (c.agent_id === route.chosen ? " ✓" : "")),
      el("td", {}, c.score.toFixed(1)), el("td", {}, c.terms.filter((x) => x.value !== 0).map((x) => x.name + " " + (x.value > 0 ? "+" : "") + x.value.toFixed(1)).join(", "))));
  }
  for (const r of route.rejected || []) t.append(el("tr", {}, el("td", { class: "muted" }, r.agent_id), el("td", {}, "–"), el("td", { class: "muted" }, r.reason)));
  return t;
}

async function showJob(id) {
  openJob = id;
  const [job, evs] = await Promise.all([api("/v1/jobs/" + id), api("/v1/jobs/" + id + "/events")]);
  $("#detail").hidden = false;
  $("#detail-title").replaceChildren(pill(job.status), " ", job.capability);
  $("#detail-meta").textContent = "job " + job.job_id + " · trace " + job.trace_id + " · attempt " + job.attempts + " of " + job.max_attempts +
    (job.replay_of ? " · replay of " + job.replay_of : "");
  $("#timeline").replaceChildren(...evs.events.map((e) => {
    const data = Object.assign({}, e.data); const route = data.route; delete data.route;
    return el("li", { "data-type": e.type }, el("strong", {}, e.type), " ", el("span", { class: "t" }, new Date(e.recorded_at).toLocaleTimeString() + " · v" + e.version),
      Object.keys(data).length ? el("pre", {}, JSON.stringify(data, null, 1)) : null, routeTable(route));
  }));
}

function setStatus(s) { $("#status").textContent = s; }

async function refresh() {
  try {
    const tab = document.querySelector(".tab.active").id;
    if (tab === "agents") await loadAgents(); else if (tab === "jobs") await loadJobs(); else await loadDead();
    if (openJob) await showJob(openJob);
    setStatus(key ? "signed in" : "");
  } catch (e) { setStatus(e.message); }
}

document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => {
  document.querySelectorAll("nav button, .tab").forEach((x) => x.classList.remove("active"));
  b.classList.add("active"); $("#" + b.dataset.tab).classList.add("active"); refresh();
}));
$("#keyform").addEventListener("submit", (e) => { e.preventDefault(); key = $("#key").value.trim(); localStorage.setItem("agentreach.key", key); $("#key").value = ""; refresh(); });
$("#close-detail").addEventListener("click", () => { $("#detail").hidden = true; openJob = null; });
for (const id of ["#window", "#f-status"]) $(id).addEventListener("change", refresh);
for (const id of ["#f-capability", "#f-agent"]) $(id).addEventListener("input", refresh);
refresh();
setInterval(refresh, 2000);
