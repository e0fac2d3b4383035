// The smct dashboard: the service's own API (/v1, /metrics) drawn in the browser.
// Views: #/ the series list, #/series/<id> one series live, #/models, #/calibration.
"use strict";

const LEVELS = ["80", "95"];
const ROLLING = 200; // observations in the rolling coverage
const view = document.getElementById("view");
const status = document.getElementById("status");
let stop = null; // aborts the event stream of the series shown

// ------------------------------------------------------------------ the API, with its key

function headers() {
  const key = sessionStorage.getItem("smct-key");
  return key ? { Authorization: "Bearer " + key } : {};
}

async function api(path) {
  const res = await fetch(path, { headers: headers() });
  if (res.status === 401) { askKey(); throw new Error("an API key is needed"); }
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new Error(body.message || res.status + " " + res.statusText);
  }
  return path === "/metrics" ? res.text() : res.json();
}

function askKey() {
  const form = document.getElementById("key-form");
  form.hidden = false;
  form.onsubmit = (e) => {
    e.preventDefault();
    sessionStorage.setItem("smct-key", document.getElementById("key").value);
    form.hidden = true;
    route();
  };
}

// The series' events, Server-Sent Events read with fetch (EventSource sends no header):
// from the oldest the service keeps (Last-Event-ID 0), then live.
async function follow(id, onEvent, signal) {
  const res = await fetch("/v1/series/" + encodeURIComponent(id) + "/events", {
    headers: { ...headers(), "Last-Event-ID": "0" }, signal,
  });
  if (!res.ok) throw new Error("events: " + res.status);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) onEvent(type, JSON.parse(data));
    }
  }
}

// ------------------------------------------------------------------ helpers

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

function table(rows, head) {
  const t = el("table");
  if (head) t.append(el("tr", {}, ...head.map((h) => el("th", {}, h))));
  for (const r of rows) t.append(el("tr", {}, ...r.map((c) => el("td", {}, c))));
  return t;
}

function first(v) { return Array.isArray(v) ? v[0] : v; }
function fmt(x, d = 3) { return x === null || x === undefined ? "" : Number(x).toFixed(d); }

function bars(counts, id) {
  const top = Math.max(1, ...counts);
  const box = el("div", { class: "bars", id });
  for (const c of counts) {
    const bar = el("div", { title: String(c) });
    bar.style.height = (100 * c) / top + "%";
    box.append(bar);
  }
  return box;
}

// ------------------------------------------------------------------ the series list

async function listView(prefix = "", after = "", pages = []) {
  const q = new URLSearchParams({ prefix, after, limit: "50" });
  const page = await api("/v1/series?" + q);
  const search = el("input", { id: "search", placeholder: "id starts with", value: prefix });
  search.onchange = () => listView(search.value.trim());
  const rows = page.series.map((id) => [el("a", { href: "#/series/" + encodeURIComponent(id) }, id)]);
  const more = el("div");
  if (pages.length) {
    const back = el("button", { id: "previous" }, "previous");
    back.onclick = () => listView(prefix, pages[pages.length - 1], pages.slice(0, -1));
    more.append(back);
  }
  if (page.next) {
    const next = el("button", { id: "next" }, "next");
    next.onclick = () => listView(prefix, page.next, [...pages, after]);
    more.append(next);
  }
  view.replaceChildren(el("h2", {}, "Series"), search,
    rows.length ? table(rows) : el("p", { class: "note" }, "no series"), more);
}

// ------------------------------------------------------------------ one series, live

async function seriesView(id) {
  const meta = await api("/v1/series/" + encodeURIComponent(id));
  const state = { obs: [], forecast: null, missed: null, seq: meta.seq };
  const fan = el("div", { id: "fan" });
  const info = el("div", { class: "card", id: "info" });
  const picp = el("div", { class: "card", id: "picp" });
  const byStep = el("div", { class: "card", id: "picp-steps" });
  const pit = el("div", { class: "card" });
  const ess = el("div", { class: "card" });
  view.replaceChildren(el("h2", {}, id), fan,
    el("p", { class: "note" }, "observations shown: ", el("span", { id: "obs-count" }, "0"),
      " (the service keeps the last SMCT_EVENTS_MAXLEN events; earlier ones are not drawn)"),
    el("div", { class: "grid" }, info, picp, byStep, pit, ess));
  let plot = null;

  const draw = () => {
    document.getElementById("obs-count").textContent = String(state.obs.length);
    const f = state.forecast;
    const xs = state.obs.map((o) => o.seq);
    const h = f ? f.median.length : 0;
    for (let k = 0; k < h; k++) xs.push(state.seq + k);
    const n = state.obs.length;
    const col = (past, future) => [...state.obs.map(past), ...Array.from({ length: h }, (_, k) => future(k))];
    const band = (lv, side) => col((o) => o.bounds[lv]?.[side] ?? null,
      (k) => (f ? first(f.intervals[lv][side][k]) : null));
    const inside = col((o) => (o.covered80 ? o.value : null), () => null);
    const outside = col((o) => (o.covered80 === false ? o.value : null), () => null);
    const median = col(() => null, (k) => first(f.median[k]));
    const data = [xs, band("95", "hi"), band("95", "lo"), band("80", "hi"), band("80", "lo"),
      median, inside, outside];
    const opts = {
      width: Math.min(1060, window.innerWidth - 40), height: 320,
      scales: { x: { time: false } },
      series: [{ label: "seq" },
        { label: "95 hi", stroke: "#9bd" }, { label: "95 lo", stroke: "#9bd" },
        { label: "80 hi", stroke: "#58a" }, { label: "80 lo", stroke: "#58a" },
        { label: "median", stroke: "#234", width: 2 },
        { label: "inside 80 %", stroke: "#272", paths: () => null, points: { show: true, size: 5, fill: "#272" } },
        { label: "outside 80 %", stroke: "#b22", paths: () => null, points: { show: true, size: 6, fill: "#b22" } }],
      bands: [{ series: [1, 2], fill: "rgba(80,130,190,0.15)" }, { series: [3, 4], fill: "rgba(80,130,190,0.3)" }],
    };
    if (plot) plot.destroy();
    plot = new uPlot(opts, data, fan);
    drawStats(n);
  };

  const drawStats = (n) => {
    const last = state.obs.slice(-ROLLING).filter((o) => o.covered80 !== null);
    const rows = LEVELS.map((lv) => {
      const hits = last.filter((o) => o.covered[lv]).length;
      const rate = last.length ? hits / last.length : null;
      const off = rate !== null && Math.abs(rate - lv / 100) > 0.05;
      return [lv + " %", el("span", { class: off ? "bad" : "good" }, fmt(rate, 2)), String(last.length)];
    });
    picp.replaceChildren(el("h3", {}, "Rolling coverage (last " + ROLLING + ")"),
      table(rows, ["level", "PICP", "observations"]));
    // coverage by horizon: the forecasts issued steps before each value, as they fared
    const scored = {};
    for (const o of state.obs.slice(-ROLLING)) {
      for (const h of o.horizons) (scored[h.step] ||= []).push(h.covered);
    }
    const stepRows = Object.keys(scored).map(Number).sort((a, b) => a - b).map((step) => [
      String(step), ...LEVELS.map((lv) => {
        const hits = scored[step].filter((c) => c[lv] !== undefined);
        const rate = hits.length ? hits.filter((c) => c[lv]).length / hits.length : null;
        const off = rate !== null && Math.abs(rate - lv / 100) > 0.05;
        return el("span", { class: off ? "bad" : "good" }, fmt(rate, 2));
      }), String(scored[step].length)]);
    byStep.replaceChildren(el("h3", {}, "Coverage by horizon (last " + ROLLING + ")"),
      stepRows.length ? table(stepRows, ["step", ...LEVELS.map((lv) => lv + " %"), "scored"])
        : el("p", { class: "note" }, "no forecast scored yet"));
    const counts = new Array(10).fill(0);
    for (const o of state.obs) if (o.pit !== null) counts[Math.min(9, Math.floor(o.pit * 10))] += 1;
    pit.replaceChildren(el("h3", {}, "PIT histogram (flat when calibrated)"), bars(counts, "pit"));
    const e = state.obs.map((o) => o.ess);
    ess.replaceChildren(el("h3", {}, "ESS of the particle weights"),
      el("p", { id: "ess" }, e.length ? fmt(e[e.length - 1], 1) + " of " + meta.particles + " (last)" : "no update yet"),
      bars(e.slice(-60), "ess-bars"));
    const a = meta.adaptation || {};
    info.replaceChildren(el("h3", {}, "Series"), table([
      ["next seq", String(state.seq)], ["version", String(meta.version)],
      ["season length", String(meta.season_length ?? "")],
      ["spread factor", (a.spread_factor || []).map((v) => fmt(v)).join(", ")],
      ["issued levels", Object.entries(a.issued_levels || {}).map(([k, v]) => k + " -> " + fmt(v, 1)).join(", ")],
      ["state bytes", String(meta.state_bytes)],
    ]), state.missed ? el("p", { class: "note" }, "events before version " + state.missed + " were not kept") : "");
  };

  const onEvent = (type, data) => {
    if (type === "missed") { state.missed = data.resumes_at; return; }
    if (type === "deleted") { status.textContent = "the series was deleted"; return; }
    if (data.forecast) state.forecast = data.forecast;
    state.seq = data.seq;
    meta.version = data.version;
    for (const o of data.observations || []) {
      const bounds = {};
      for (const [lv, b] of Object.entries(o.intervals)) bounds[lv] = { lo: first(b.lo), hi: first(b.hi) };
      state.obs.push({ seq: o.seq, value: first(o.value), bounds, covered: o.covered || {},
        covered80: o.covered ? o.covered["80"] : null, pit: first(o.pit), ess: o.ess,
        horizons: o.horizons || [] });
    }
    draw();
  };

  const q = new URLSearchParams({ horizon: "24" });
  for (const lv of LEVELS) q.append("levels", lv);
  state.forecast = await api("/v1/series/" + encodeURIComponent(id) + "/forecast?" + q);
  draw();
  const controller = new AbortController();
  stop = () => controller.abort();
  status.textContent = "live";
  follow(id, onEvent, controller.signal).catch((e) => {
    if (e.name !== "AbortError") status.textContent = "stream ended: " + e.message;
  });
}

// ------------------------------------------------------------------ the model

async function modelsView() {
  const { models } = await api("/v1/models");
  const m = models[0];
  const rows = ["model_version", "stateful", "backend", "device", "n_features", "target_dim",
    "covariates", "min_history"].map((k) => [k, String(m[k])]);
  view.replaceChildren(el("h2", {}, "The served model"), table(rows, ["", ""]),
    el("h3", {}, "Its metrics at training"), el("pre", { id: "model-metrics" }, JSON.stringify(m.manifest.metrics || {}, null, 2)),
    el("h3", {}, "Manifest"), el("pre", {}, JSON.stringify(m.manifest, null, 2)));
}

// ------------------------------------------------------------------ calibration, from /metrics

function samples(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const pair of (m[3] || "").matchAll(/(\w+)="([^"]*)"/g)) labels[pair[1]] = pair[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

async function calibrationView() {
  const all = samples(await api("/metrics"));
  const total = all.find((s) => s.name === "smct_observations_total")?.value || 0;
  const covered = all.filter((s) => s.name === "smct_observations_covered_total");
  const rows = covered.map((s) => {
    const rate = total ? s.value / total : null;
    return [s.labels.level + " %", el("span", { class: "picp" }, fmt(rate, 3)), String(s.value)];
  });
  // by horizon: the forecasts issued `step` steps before each value (smct_horizon_*)
  const of = (name, step, lv) => all.find((s) => s.name === name && s.labels.step === step
    && s.labels.level === lv)?.value || 0;
  const steps = [...new Set(all.filter((s) => s.name === "smct_horizon_scored_total")
    .map((s) => s.labels.step))].sort((a, b) => Number(a) - Number(b));
  const levels = [...new Set(covered.map((s) => s.labels.level))];
  const stepRows = steps.map((step) => [step, ...levels.flatMap((lv) => {
    const n = of("smct_horizon_scored_total", step, lv);
    return [fmt(n ? of("smct_horizon_covered_total", step, lv) / n : null, 3),
      fmt(n ? of("smct_horizon_interval_width_total", step, lv) / n : null, 3)];
  })]);
  const cum = all.filter((s) => s.name === "smct_pit_bucket").sort((a, b) => Number(a.labels.le) - Number(b.labels.le));
  const counts = cum.filter((s) => s.labels.le !== "+Inf").map((s, i, arr) => s.value - (i ? arr[i - 1].value : 0));
  view.replaceChildren(el("h2", {}, "Calibration of every series (since the service started)"),
    el("p", {}, "observations scored: ", el("span", { id: "total" }, String(total))),
    table(rows, ["level", "PICP", "covered"]),
    el("h3", {}, "By horizon: the forecasts issued steps before each value"),
    stepRows.length
      ? el("div", { id: "by-step" }, table(stepRows, ["step", ...levels.flatMap((lv) => [lv + " % PICP", lv + " % MPIW"])]))
      : el("p", { class: "note" }, "no forecast scored yet"),
    el("h3", {}, "PIT histogram"), bars(counts, "pit-all"),
    el("p", { class: "note" }, "The same figures as /metrics (docs/contracts.md)."));
}

// ------------------------------------------------------------------ routing

async function route() {
  if (stop) { stop(); stop = null; }
  status.textContent = "";
  const hash = location.hash || "#/";
  try {
    if (hash.startsWith("#/series/")) await seriesView(decodeURIComponent(hash.slice(9)));
    else if (hash === "#/models") await modelsView();
    else if (hash === "#/calibration") await calibrationView();
    else await listView();
  } catch (e) {
    view.replaceChildren(el("p", { class: "bad", id: "error" }, e.message));
  }
}

window.addEventListener("hashchange", route);
route();
