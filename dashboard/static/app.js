// fencegate dashboard: reads /api/actuators, /api/audit and the event
// stream /api/events; in the simulator also /api/sim and /api/sim/events.
"use strict";

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
};

const FEED_MAX = 200;
let refreshTimer = null;
let lastFences = {};

function ago(iso) {
  if (!iso) return "never";
  const t = new Date(iso);
  if (t.getFullYear() < 2000) return t.toISOString() + " (clock not set)";
  const s = Math.round((Date.now() - t.getTime()) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  return t.toLocaleString();
}
const clock = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "");
const pair = (f) => (f ? `${f.token}/${f.seq}` : "–");

function renderActuators(list) {
  const root = $("#actuators");
  root.replaceChildren();
  for (const a of list) {
    const on = a.level === "" ? null : (a.level === "high") !== a.active_low;
    const lamp = el("div", {
      class: "lamp " + (on === null ? "unknown" : on ? "on" : "off"),
      id: "lamp-" + a.name, "data-level": a.level, "data-on": String(on),
      title: on === null ? a.level_error : `pin ${a.pin} ${a.level}`,
    });
    const stateCls = a.state === "on" ? "state-on" : "state-off";
    const mismatch = on !== null && a.state !== "" && (a.state === "on") !== on;
    const dl = el("dl", {},
      el("dt", { text: "state" }), el("dd", { class: stateCls, id: "state-" + a.name, text: a.state || "unknown" }),
      el("dt", { text: "level" }), el("dd", { class: mismatch ? "mismatch" : "", text: (a.level || "unreadable") + (mismatch ? " ≠ state" : "") + (a.active_low ? " (active low)" : "") }),
      el("dt", { text: "fence" }), el("dd", { id: "fence-" + a.name, text: pair(a.fence) }),
      el("dt", { text: "holder" }), el("dd", { text: a.holder || "–" }),
      el("dt", { text: "changed" }), el("dd", { title: a.changed_at || "", text: ago(a.changed_at) }),
    );
    if (a.drives != null) dl.append(el("dt", { text: "drives" }), el("dd", { text: String(a.drives) }));
    const card = el("article", { class: "card", id: "card-" + a.name },
      lamp,
      el("div", { class: "name" }, a.name, a.scope !== a.name ? el("span", { class: "scope", title: "fence scope shared with other actuators", text: a.scope }) : null),
      el("div", { class: "sub", text: a.pin }),
      dl,
    );
    const key = a.name, f = pair(a.fence);
    if (lastFences[key] !== undefined && lastFences[key] !== f) card.classList.add("flash");
    lastFences[key] = f;
    root.append(card);
  }
}

async function refresh() {
  refreshTimer = null;
  try {
    const r = await fetch("/api/actuators", { cache: "no-store" });
    if (r.ok) renderActuators(await r.json());
  } catch (_) { /* the stream's status shows the outage */ }
}
function scheduleRefresh() {
  if (!refreshTimer) refreshTimer = setTimeout(refresh, 60);
}

function feedItem(d, fresh) {
  const verb = d.want ? `${d.want}` : d.outcome === "boot" || d.outcome === "moved" ? d.state || "" : "fence only";
  const who = d.holder ? ` · ${d.holder}` : "";
  const what = d.outcome === "boot" || d.outcome === "moved"
    ? `${d.actuator} ${verb} (${d.outcome === "boot" ? "boot policy" : "scope change"})`
    : `${d.actuator} ${verb} · token ${pair(d.command)}${who}`;
  const why = d.error || (d.outcome === "applied" ? `fence now ${pair(d.fence)}` :
    d.outcome === "duplicate" ? `redelivery of ${d.id || "a command"}: answered again, not driven` : "");
  const li = el("li", { class: fresh ? "new" : "", "data-outcome": d.outcome, "data-actuator": d.actuator },
    el("span", { class: "pill " + d.outcome, text: d.outcome }),
    el("span", { class: "what", text: what }),
    el("span", { class: "when", text: clock(d.at) }),
    why ? el("span", { class: "why", text: why }) : null,
  );
  return li;
}
function addFeed(d, fresh = true) {
  const feed = $("#feed");
  feed.prepend(feedItem(d, fresh));
  while (feed.children.length > FEED_MAX) feed.lastChild.remove();
}

async function loadHistory() {
  try {
    const r = await fetch("/api/audit?n=60", { cache: "no-store" });
    if (!r.ok) return;
    const entries = await r.json();
    $("#feed").replaceChildren();
    for (const e of entries) {
      addFeed({ at: e.at, actuator: e.actuator, id: e.id, holder: e.holder, outcome: e.outcome,
        command: e.command, want: e.outcome === "boot" || e.outcome === "moved" ? "" : e.state, state: e.state, fence: e.fence, error: e.error }, false);
    }
  } catch (_) {}
}

function connect() {
  const es = new EventSource("/api/events");
  const live = $("#live");
  es.onopen = () => { live.textContent = "live"; live.className = "badge live"; loadHistory(); refresh(); };
  es.onerror = () => { live.textContent = "reconnecting…"; live.className = "badge off"; };
  es.addEventListener("decision", (ev) => { addFeed(JSON.parse(ev.data)); scheduleRefresh(); });
}

// --- simulator ---------------------------------------------------------

function renderTwins(twins) {
  if (!twins || twins.length === 0) return;
  $("#twins").hidden = false;
  const root = $("#twin-list");
  root.replaceChildren();
  for (const t of twins) {
    const on = t.level === "high";
    root.append(el("article", { class: "card", id: "twin-" + t.name },
      el("div", { class: "lamp " + (on ? "on" : "off"), id: "twin-lamp-" + t.name, "data-on": String(on) }),
      el("div", { class: "name" }, t.name, el("span", { class: "scope", text: "unfenced" })),
      el("div", { class: "sub", text: "no fence: last writer wins" }),
      el("dl", {},
        el("dt", { text: "state" }), el("dd", { class: on ? "state-on" : "state-off", text: on ? "on" : "off" }),
        el("dt", { text: "last writer" }), el("dd", { text: t.holder ? `${t.holder} (token ${t.token})` : "–" })),
    ));
  }
}

function step(s) {
  const li = el("li", { class: s.kind || "", text: s.text });
  $("#steps").append(li);
}

async function startScenario(name) {
  const r = await fetch("/api/sim/scenarios/" + encodeURIComponent(name), { method: "POST" });
  if (!r.ok) alert(await r.text());
}

async function initSim() {
  let info;
  try {
    const r = await fetch("/api/sim", { cache: "no-store" });
    if (!r.ok) return;
    info = await r.json();
  } catch (_) { return; }
  $("#sim-badge").hidden = false;
  $("#scenarios").hidden = false;
  $("#gateway-id").textContent = info.gateway_id;
  $("#topic-hint").textContent = `${info.prefix}/${info.gateway_id}/<actuator>/set on ${info.broker}`;
  const box = $("#scenario-buttons");
  for (const s of info.scenarios) {
    box.append(el("button", { "data-scenario": s.name, class: s.name === "unfenced" ? "unfenced" : "", type: "button" },
      s.title, el("small", { text: s.description })));
  }
  box.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-scenario]");
    if (b) startScenario(b.dataset.scenario);
  });
  renderTwins(info.twins);
  const es = new EventSource("/api/sim/events");
  const buttons = () => box.querySelectorAll("button");
  es.addEventListener("start", (ev) => {
    const d = JSON.parse(ev.data);
    $("#steps").replaceChildren();
    $("#verdict").hidden = true;
    $("#verdict").className = "verdict";
    delete $("#verdict").dataset.scenario;
    $("#scenarios-title").textContent = "Scenario: " + d.scenario;
    buttons().forEach((b) => (b.disabled = true));
  });
  es.addEventListener("step", (ev) => step(JSON.parse(ev.data)));
  es.addEventListener("verdict", (ev) => {
    const d = JSON.parse(ev.data);
    const v = $("#verdict");
    v.hidden = false;
    v.className = "verdict " + (d.pass ? "pass" : "fail");
    v.dataset.scenario = d.scenario;
    v.textContent = (d.pass ? "PASS " : "FAIL ") + d.text;
    buttons().forEach((b) => (b.disabled = false));
    scheduleRefresh();
  });
  es.addEventListener("twins", (ev) => renderTwins(JSON.parse(ev.data)));
  es.addEventListener("gateway", (ev) => {
    const d = JSON.parse(ev.data);
    step({ kind: "gateway", text: "gateway process: " + d.status });
    scheduleRefresh();
  });
}

connect();
refresh();
loadHistory();
initSim();
setInterval(scheduleRefresh, 10000); // keeps "changed … ago" fresh
