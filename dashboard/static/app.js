// fencegate dashboard: reads /api/status (every 2 s), /api/actuators,
// /api/audit and the event stream /api/events; in the simulator also
// /api/sim and /api/sim/events.
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
// ?snapshot draws the page from reads of the API alone, with no event
// stream: a stream never ends, and a headless Chromium's
// --virtual-time-budget lets its clock run only while no request is
// pending, so that with a stream open it would never take its screenshot.
const snapshot = new URLSearchParams(location.search).has("snapshot");
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
// since is a time of day, with the date unless it is today.
function since(iso) {
  const t = new Date(iso);
  return t.toDateString() === new Date().toDateString() ? t.toLocaleTimeString() : t.toLocaleString();
}
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const pair = (f) => (f ? `${f.token}/${f.seq}` : "–");

// unchanged reports whether what list would draw is what is on the page:
// the cards are drawn again only when something shown changed (or, for
// the "… ago" texts, every 10 s), so that the nodes stay put otherwise.
// The dead-man's countdown runs in the page; its left_ms is no change.
const drawn = {};
function unchanged(what, list) {
  const key = JSON.stringify(list, (k, v) => (k === "left_ms" ? undefined : v)) + Math.floor(Date.now() / 10000);
  if (drawn[what] === key) return true;
  drawn[what] = key;
  return false;
}

// pinText names an output for people: a Modbus output's canonical name
// (modbus/BUS/UNIT/TABLE/ADDRESS) in words that wrap in a card.
function pinText(pin) {
  const m = /^modbus\/([^/]+)\/(\d+)\/([^/]+)\/(\d+)$/.exec(pin);
  return m ? `Modbus bus ${m[1]}, unit ${m[2]}, ${m[3]} ${m[4]}` : pin;
}

function renderActuators(list) {
  if (unchanged("actuators", list)) return;
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
    if (a.duty !== undefined) dl.append(el("dt", { text: "duty" }), el("dd", { id: "duty-" + a.name, text: `${a.duty} %` }));
    if (a.drives != null) dl.append(el("dt", { text: "drives" }), el("dd", { text: String(a.drives) }));
    if (a.pulse) {
      dl.append(el("dt", { text: "pulse" }), el("dd", { id: "pulse-" + a.name, class: "pulse-" + a.pulse.status,
        text: `${a.pulse.width_ms} ms, ${a.pulse.status} (${pair(a.pulse.fence)})` }));
    }
    if (a.deadman) {
      // Once it has fired, a dead-man is idle until a command arms it
      // again: it fires at boot too, when no holder has commanded yet. What
      // it switched, if anything, the "why" row says.
      const d = a.deadman;
      dl.append(el("dt", { text: "dead-man" }), el("dd", { id: "deadman-" + a.name, class: d.tripped ? "deadman-idle" : "deadman",
        "data-state": d.tripped ? "idle" : "armed", "data-left": String(d.left_ms), "data-at": String(Date.now()),
        title: `${d.after_ms / 1000} s without a command that raises the fence sets the safe state, ${d.state}`,
        text: d.tripped ? `idle until a command (safe: ${d.state})` : `${(d.left_ms / 1000).toFixed(1)} s left of ${d.after_ms / 1000} s` }));
    }
    if (a.watched) {
      // An output on a device the gateway reads back (a Modbus module).
      const w = a.watched;
      dl.append(el("dt", { text: "device" }), el("dd", { id: "device-" + a.name, class: w.down ? "mismatch" : "",
        "data-down": String(!!w.down), title: w.down ? `since ${w.down_since}` : "",
        text: (w.down ? `down: ${w.down}` : "answers") + (w.out_of_band ? ` · changed behind the gateway's back ${plural(w.out_of_band, "time")}` : "") }));
    }
    if (a.why) dl.append(el("dt", { text: "why" }), el("dd", { id: "why-" + a.name, class: "why", text: a.why }));
    const card = el("article", { class: "card", id: "card-" + a.name },
      lamp,
      el("div", { class: "name" }, a.name,
        a.scope !== a.name ? el("span", { class: "scope", title: "fence scope shared with other actuators", text: a.scope }) : null,
        a.interlock ? el("span", { class: "scope interlock", id: "interlock-" + a.name, title: "interlock: at most one of its actuators is on", text: "interlock " + a.interlock }) : null),
      el("div", { class: "sub", text: pinText(a.pin) + (a.kind === "pulse" ? " · pulse output" : a.kind === "setpoint" ? " · set-point output" : "") }),
      dl,
    );
    if (simMode && a.watched) {
      // The simulator's Modbus relay module: its power, and its own button.
      card.append(
        el("button", { type: "button", class: "modbus", id: "modbus-power-" + a.name, "data-path": "power", "data-on": String(!!a.watched.down),
          text: a.watched.down ? "restore the module's power" : "cut the module's power" }),
        el("button", { type: "button", class: "modbus", id: "modbus-button-" + a.name, "data-path": "button/" + encodeURIComponent(a.name),
          text: a.kind === "setpoint" ? "turn the module's knob" : "press the module's button" }));
    }
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
    const i = await fetch("/api/inputs", { cache: "no-store" });
    if (i.ok) renderInputs(await i.json());
  } catch (_) { /* the stream's status shows the outage */ }
}

function renderInputs(list) {
  $("#inputs-panel").hidden = list.length === 0;
  if (unchanged("inputs" + simMode, list)) return;
  const root = $("#inputs");
  root.replaceChildren();
  for (const i of list) {
    const high = i.level === "high";
    const card = el("article", { class: "card input", id: "input-" + i.name },
      el("div", { class: "lamp " + (high ? "on" : "off"), id: "input-lamp-" + i.name, "data-level": i.level }),
      el("div", { class: "name", text: i.name }),
      el("div", { class: "sub", text: `${i.pin} · pull ${i.pull}` }),
      el("dl", {},
        el("dt", { text: "level" }), el("dd", { id: "input-level-" + i.name, text: i.level || "unknown" }),
        el("dt", { text: "changes" }), el("dd", { text: String(i.seq) }),
        el("dt", { text: "changed" }), el("dd", { title: i.changed_at || "", text: ago(i.changed_at) })),
    );
    if (simMode) {
      card.append(el("button", { type: "button", class: "flip", id: "flip-" + i.name, "data-input": i.name, "data-to": high ? "low" : "high",
        text: high ? "switch low" : "switch high" }));
    }
    root.append(card);
  }
}

// In the simulator, a flip button sets the input's line as a switch would.
document.addEventListener("click", async (ev) => {
  const b = ev.target.closest("button.flip");
  if (!b) return;
  b.disabled = true;
  const r = await fetch("/api/sim/inputs/" + encodeURIComponent(b.dataset.input), {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ level: b.dataset.to }),
  });
  if (!r.ok) alert(await r.text());
  setTimeout(refresh, 150);
});
// In the simulator, the Modbus module's buttons act on the module, behind
// the gateway's back: the gateway finds it at its next read-back.
document.addEventListener("click", async (ev) => {
  const b = ev.target.closest("button.modbus");
  if (!b) return;
  b.disabled = true;
  const r = await fetch("/api/sim/modbus/" + b.dataset.path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ on: b.dataset.on === "true" }),
  });
  if (!r.ok) alert(await r.text());
  setTimeout(refresh, 1200);
});
function scheduleRefresh() {
  if (!refreshTimer) refreshTimer = setTimeout(refresh, 60);
}

// The dead-man countdowns run down between refreshes; at 0 the gateway
// decides, and the next refresh shows it.
setInterval(() => {
  for (const dd of document.querySelectorAll("dd.deadman")) {
    const left = Math.max(0, Number(dd.dataset.left) - (Date.now() - Number(dd.dataset.at)));
    dd.textContent = dd.textContent.replace(/^[0-9.]+ s left/, (left / 1000).toFixed(1) + " s left");
    if (left === 0) scheduleRefresh();
  }
}, 200);

// REASONS are the words for a rejected command's reason code.
const REASONS = { interlock: "interlock", busy: "busy (pulsing)", invalid: "invalid command", "unknown-actuator": "unknown actuator", retained: "retained message" };

// label says what a decision was about: a state, "fence only" for an
// applied, duplicate or stale command without one, or why it was rejected.
function label(d) {
  const who = d.holder ? ` · ${d.holder}` : "";
  switch (d.outcome) {
    case "boot":
    case "moved":
      return `${d.actuator} ${d.state || ""} (${d.outcome === "boot" ? "boot policy" : "scope change"})`;
    case "rejected": {
      const token = d.command && (d.command.token || d.command.seq) ? ` · token ${pair(d.command)}` : "";
      const reason = d.reason ? `rejected: ${REASONS[d.reason] || d.reason}` : "rejected";
      return `${d.actuator || "?"}${d.want ? " " + d.want : ""} · ${reason}${token}${who}`;
    }
    case "failed":
      return `${d.actuator}${d.want ? " " + d.want : ""} · token ${pair(d.command)}${who}`;
  }
  return `${d.actuator} ${d.want || "fence only"} · token ${pair(d.command)}${who}`;
}

function feedItem(d, fresh) {
  const why = d.error || d.why || (d.outcome === "applied" ? `fence now ${pair(d.fence)}` :
    d.outcome === "duplicate" ? `redelivery of ${d.id || "a command"}: answered again, not driven` : "");
  const li = el("li", { class: fresh ? "new" : "", "data-outcome": d.outcome, "data-actuator": d.actuator, "data-reason": d.reason || "" },
    el("span", { class: "pill " + d.outcome, text: d.outcome }),
    el("span", { class: "what", text: label(d) }),
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
        command: e.command, want: e.outcome === "boot" || e.outcome === "moved" ? "" : e.state, state: e.state, fence: e.fence, reason: e.reason, error: e.error, why: e.why }, false);
    }
  } catch (_) {}
}

function connect() {
  const live = $("#live");
  if (snapshot) {
    live.textContent = "feed: off (snapshot)";
    return;
  }
  const es = new EventSource("/api/events");
  // The badge describes the event stream only; #broker-state says whether
  // the gateway takes commands.
  es.onopen = () => { live.textContent = "feed: live"; live.className = "badge live"; loadHistory(); refresh(); pollStatus(); };
  es.onerror = () => { live.textContent = "feed: reconnecting…"; live.className = "badge off"; pollStatus(); };
  es.addEventListener("decision", (ev) => { addFeed(JSON.parse(ev.data)); scheduleRefresh(); });
}

// --- the gateway's status ----------------------------------------------

// brokerState puts the gateway's broker connection in plain words.
function brokerState(st) {
  const b = st.broker;
  if (b.conflict) return { state: "conflict", taking: false, text: "another gateway uses this id: " + b.conflict };
  if (!b.connected) {
    return { state: "not-connected", taking: false,
      text: `not connected: ${b.last_error || "connecting to " + b.url} (${plural(b.failures, "attempt")})` };
  }
  if (!b.subscribed) {
    return { state: "not-subscribed", taking: false,
      text: `connected to ${b.url} since ${since(b.since)}, not taking commands: ${b.last_error || "subscribing"}` };
  }
  return { state: "taking", taking: true, text: `connected to ${b.url} since ${since(b.since)}, taking commands` };
}

function showBrokerState(s) {
  const p = $("#broker-state");
  p.textContent = s.text;
  p.className = "notice " + (s.taking ? "ok" : "bad");
  p.dataset.state = s.state;
  p.dataset.taking = String(s.taking);
}

let statusBusy = false;
async function pollStatus() {
  if (statusBusy) return;
  statusBusy = true;
  try {
    const r = await fetch("/api/status", { cache: "no-store" });
    const body = await r.json().catch(() => null);
    if (!r.ok || !body) throw new Error((body && body.error) || `HTTP ${r.status}`);
    $("#gateway-id").textContent = body.gateway_id;
    $("#version").textContent = body.version;
    $("#topic-hint").textContent = `${body.topics.replace("+", "<actuator>")} on ${body.broker.url}`;
    showBrokerState(brokerState(body));
  } catch (e) {
    // In the simulator, #sim-gateway says why its process does not answer.
    showBrokerState({ state: "unreachable", taking: false,
      text: "not taking commands: the gateway does not answer" + (simMode ? "" : ": " + e.message) });
  } finally {
    statusBusy = false;
  }
  if (simMode) pollSim();
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

// markScenario shows on its button the scenario that plays, or that played
// last and how it ended; the other buttons show nothing of the kind.
const PLAYED = { playing: "playing…", pass: "last played: PASS", fail: "last played: FAIL" };
function markScenario(name, state) {
  for (const b of $("#scenario-buttons").querySelectorAll("button[data-scenario]")) {
    const mine = b.dataset.scenario === name;
    if (mine) {
      b.dataset.state = state;
      b.setAttribute("aria-current", "true");
    } else {
      delete b.dataset.state;
      b.removeAttribute("aria-current");
    }
    b.querySelector(".result").textContent = mine ? PLAYED[state] : "";
  }
}

async function startScenario(name) {
  const r = await fetch("/api/sim/scenarios/" + encodeURIComponent(name), { method: "POST" });
  if (!r.ok) alert(await r.text());
}

let simMode = false;

async function fetchSim() {
  try {
    const r = await fetch("/api/sim", { cache: "no-store" });
    return r.ok ? await r.json() : null;
  } catch (_) { return null; }
}

// showSimGateway shows the state of the simulator's gateway process.
function showSimGateway(info) {
  const p = $("#sim-gateway");
  const st = info.gateway;
  p.hidden = false;
  p.dataset.status = st;
  if (st.startsWith("stopped: ")) {
    p.className = "notice bad";
    p.textContent = `gateway process ${st}. The simulator does not restart it: fix what it says, then restart the simulator.`;
  } else if (st === "online") {
    p.className = "notice ok";
    p.textContent = `gateway process: online${info.gateway_pid ? " (pid " + info.gateway_pid + ")" : ""}`;
  } else {
    p.className = "notice warn";
    p.textContent = `gateway process: ${st}; the simulator restarts it`;
  }
}

async function pollSim() {
  const info = await fetchSim();
  if (info) showSimGateway(info);
}

async function initSim() {
  const info = await fetchSim();
  if (!info) return;
  simMode = true;
  refresh(); // again, with the inputs' switches
  showSimGateway(info);
  $("#sim-badge").hidden = false;
  $("#scenarios").hidden = false;
  $("#page-acts").textContent = "In the simulator this page acts: a scenario button plays its scenario, whose controllers " +
    "send commands over MQTT, an input's switch sets that input's line, and the lamp's Modbus module can lose its power or be " +
    "switched by its own button, behind the gateway's back. An output has no switch here: send it a command.";
  const box = $("#scenario-buttons");
  for (const s of info.scenarios) {
    box.append(el("button", { "data-scenario": s.name, type: "button" },
      s.title, el("span", { class: "result" }), el("small", { text: s.description })));
  }
  box.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-scenario]");
    if (b) startScenario(b.dataset.scenario);
  });
  renderTwins(info.twins);
  const buttons = () => box.querySelectorAll("button");
  if (info.running) {
    markScenario(info.running, "playing");
    buttons().forEach((b) => (b.disabled = true));
  }
  if (snapshot) return;
  const es = new EventSource("/api/sim/events");
  es.addEventListener("start", (ev) => {
    const d = JSON.parse(ev.data);
    markScenario(d.scenario, "playing");
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
    markScenario(d.scenario, d.pass ? "pass" : "fail");
    buttons().forEach((b) => (b.disabled = false));
    scheduleRefresh();
  });
  es.addEventListener("twins", (ev) => renderTwins(JSON.parse(ev.data)));
  es.addEventListener("gateway", (ev) => {
    const d = JSON.parse(ev.data);
    step({ kind: "gateway", text: "gateway process: " + d.status });
    scheduleRefresh();
    pollStatus();
  });
}

connect();
refresh();
loadHistory();
initSim();
pollStatus();
setInterval(pollStatus, 2000);
setInterval(scheduleRefresh, 2000); // keeps "changed … ago" fresh, and shows what no decision announces (inputs, trips, dead-men, pulse ends)
