// GenEnv dashboard: lists runs and draws a run's per-epoch curves as inline SVG from the JSON API.
// No external assets (CSP allows this origin only); all text goes through textContent, never innerHTML.
"use strict";

const TOKEN_KEY = "genenv.dashboard.token";
const REFRESH_MS = 3000;
const ACTIVE = new Set(["created", "running"]); // statuses whose epochs can still change
const PHASES = ["generate", "rollout", "verify", "score", "train", "publish", "evaluate", "close"];
const SVG_NS = "http://www.w3.org/2000/svg";
const W = 460, H = 230, M = { top: 26, right: 12, bottom: 30, left: 44 };

// The curves, in the order drawn; `unit` only picks the y range.
const CHARTS = [
  { id: "p_hat", title: "p̂ on generated tasks (α ± k_min shaded)", unit: "share", band: true,
    series: [["p_hat", "p̂"]] },
  { id: "in_band", title: "Seed batches inside the α band", unit: "share",
    series: [["in_band_share", "in-band share"]] },
  { id: "lengths", title: "Mean length (tokens)", unit: "count",
    series: [["mean_response_tokens", "agent response"], ["mean_task_tokens", "task prompt"]] },
  { id: "generations", title: "Simulator generations", unit: "count",
    series: [["tasks_valid", "valid"], ["tasks_rejected", "rejected"]] },
  { id: "solved", title: "Tasks solved by every / no attempt", unit: "count",
    series: [["tasks_solved", "solved"], ["tasks_unsolved", "unsolved"]] },
  { id: "benchmarks", title: "Benchmark scores", unit: "score", series: "benchmarks" },
];

const state = { runId: null, run: null, timer: null, generation: 0 };
const $ = (id) => document.getElementById(id);

function token() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

function setHash(runId) {
  const params = new URLSearchParams();
  if (runId) params.set("run", runId);
  const hash = params.toString();
  history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
}

function setStatus(text, isError) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("error", Boolean(isError));
}

async function api(path) {
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  const res = await fetch(path, { headers, cache: "no-store" });
  if (!res.ok) {
    let message = "HTTP " + res.status;
    try {
      message = (await res.json()).error.message;
    } catch (_) { /* not an error envelope */ }
    const err = new Error(message);
    err.status = res.status;
    throw err;
  }
  return res.json();
}

async function allEpochs(runId) {
  const items = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ limit: "500" });
    if (cursor) query.set("cursor", cursor);
    const page = await api("v1/runs/" + encodeURIComponent(runId) + "/epochs?" + query);
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

function el(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function fmt(v) {
  if (v === null || v === undefined) return "—";
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(3);
}

// A tick step from 1, 2, 2.5, 5 × 10^k (no 2.5 for counts) giving at most 5 ticks up to v.
function tickStep(v, integer) {
  if (!(v > 0)) return integer ? 1 : 0.25;
  const raw = v / 4, unit = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of integer ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10]) {
    if (m * unit >= raw) return integer && m * unit < 1 ? 1 : m * unit;
  }
  return 10 * unit;
}

function tickLabel(v) {
  return String(Number(v.toPrecision(6)));
}

// The chart's series as [label, [[epoch, value], ...]] from the epochs that have a summary.
function seriesOf(chart, epochs) {
  const done = epochs.filter((e) => e.summary);
  if (chart.series === "benchmarks") {
    const names = [...new Set(done.flatMap((e) => Object.keys(e.summary.benchmark_scores || {})))].sort();
    return names.map((n) => [n, done.filter((e) => n in e.summary.benchmark_scores)
      .map((e) => [e.index, e.summary.benchmark_scores[n]])]);
  }
  return chart.series.map(([key, label]) => [label, done
    .filter((e) => typeof e.summary[key] === "number").map((e) => [e.index, e.summary[key]])]);
}

function drawChart(chart, epochs, config) {
  const series = seriesOf(chart, epochs);
  const values = series.flatMap(([, pts]) => pts.map((p) => p[1]));
  const xs = epochs.map((e) => e.index);
  const x0 = xs.length ? Math.min(...xs) : 0;
  const x1 = Math.max(xs.length ? Math.max(...xs) : 1, x0 + 1);
  const yStep = chart.unit === "share" ? 0.25 : tickStep(Math.max(0, ...values), chart.unit === "count");
  const yMax = chart.unit === "share" ? 1 : yStep * Math.max(1, Math.ceil(Math.max(0, ...values) / yStep - 1e-9));
  const px = (x) => M.left + ((x - x0) / (x1 - x0)) * (W - M.left - M.right);
  const py = (y) => H - M.bottom - (y / yMax) * (H - M.top - M.bottom);

  const figure = document.createElement("figure");
  figure.className = "chart";
  figure.dataset.chart = chart.id;
  const caption = document.createElement("figcaption");
  caption.textContent = chart.title;
  figure.append(caption);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": chart.title });

  const grid = el("g", { class: "grid" });
  const ticks = el("g");
  for (let i = 0; i * yStep <= yMax + 1e-9; i++) {
    const y = i * yStep;
    grid.append(el("line", { x1: M.left, x2: W - M.right, y1: py(y), y2: py(y) }));
    ticks.append(el("text", { class: "tick", x: M.left - 6, y: py(y) + 4, "text-anchor": "end" }, tickLabel(y)));
  }
  const step = Math.max(1, Math.ceil((x1 - x0 + 1) / 10));
  for (let x = x0; x <= x1; x += step) {
    ticks.append(el("text", { class: "tick", x: px(x), y: H - M.bottom + 16, "text-anchor": "middle" }, String(x)));
  }
  ticks.append(el("text", { class: "tick", x: W - M.right, y: H - 2, "text-anchor": "end" }, "epoch"));
  svg.append(grid);

  if (chart.band && config) {
    const { alpha, k_min: kMin } = config.curriculum;
    const lo = Math.max(0, alpha - kMin), hi = Math.min(1, alpha + kMin);
    svg.append(el("rect", { class: "band", "data-lo": lo, "data-hi": hi,
      x: M.left, width: W - M.left - M.right, y: py(hi), height: py(lo) - py(hi) }));
    svg.append(el("line", { class: "alpha", x1: M.left, x2: W - M.right, y1: py(alpha), y2: py(alpha) }));
  }
  svg.append(el("path", { class: "axis", d: `M${M.left},${M.top}V${H - M.bottom}H${W - M.right}` }));
  svg.append(ticks);

  series.forEach(([label, pts], i) => {
    const cls = "s" + (i % 6);
    if (pts.length) {
      const d = pts.map(([x, y], j) => `${j ? "L" : "M"}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join("");
      svg.append(el("path", { class: "series " + cls, d, "data-series": label, "data-points": pts.length }));
      for (const [x, y] of pts) {
        const dot = el("circle", { class: cls, cx: px(x), cy: py(y), r: 3 });
        dot.append(el("title", {}, `${label} · epoch ${x}: ${fmt(y)}`));
        svg.append(dot);
      }
    }
    const lx = M.left + 8 + i * 120;
    svg.append(el("rect", { class: cls, x: lx, y: 8, width: 10, height: 10 }));
    svg.append(el("text", { class: "legend", x: lx + 14, y: 17 }, label));
  });
  if (!values.length) {
    const what = chart.series === "benchmarks" ? "no evaluations yet" : "no finished epoch yet";
    svg.append(el("text", { class: "empty", x: W / 2, y: H / 2, "text-anchor": "middle" }, what));
  }
  figure.append(svg);
  return figure;
}

function drawTable(epochs) {
  const table = $("epoch-table");
  table.replaceChildren();
  $("table-title").hidden = !epochs.length;
  if (!epochs.length) return;
  const seen = new Set(epochs.flatMap((e) => Object.keys((e.summary && e.summary.phase_seconds) || {})));
  const phases = [...PHASES.filter((p) => seen.has(p)), ...[...seen].filter((p) => !PHASES.includes(p)).sort()];
  const head = table.createTHead().insertRow();
  for (const name of ["epoch", "phase", "agent v", "simulator v", ...phases, "total"]) {
    const th = document.createElement("th");
    th.textContent = name;
    head.append(th);
  }
  const body = table.createTBody();
  for (const e of epochs) {
    const s = e.summary || {};
    const secs = s.phase_seconds || {};
    const total = Object.values(secs).reduce((a, b) => a + b, 0);
    const cells = [e.index, e.phase, s.agent_adapter_version, s.simulator_adapter_version,
      ...phases.map((p) => (p in secs ? secs[p].toFixed(1) : null)), e.summary ? total.toFixed(1) : null];
    const row = body.insertRow();
    for (const c of cells) row.insertCell().textContent = c === null || c === undefined ? "—" : String(c);
  }
}

function drawRun(run, epochs) {
  const c = run.config;
  $("run-title").textContent = `${run.name} · ${run.status}`;
  const meta = [`id ${run.id}`, `mode ${c.mode}`, `domain ${c.domain}`,
    `epoch ${Math.min(run.current_epoch + 1, c.epochs)}/${c.epochs}`,
    `α ${c.curriculum.alpha}`, `k_min ${c.curriculum.k_min}`];
  if (run.error) meta.push(`error: ${run.error}`);
  $("run-meta").textContent = meta.join(" · ");
  $("charts").replaceChildren(...CHARTS.map((chart) => drawChart(chart, epochs, c)));
  drawTable(epochs);
}

function drawRuns(runs) {
  const list = $("run-list");
  list.replaceChildren();
  for (const r of runs) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.runId = r.id;
    button.classList.toggle("selected", r.id === state.runId);
    const status = document.createElement("span");
    status.className = "status";
    status.textContent = r.status;
    button.append(status, document.createTextNode(r.name));
    button.title = r.id;
    button.addEventListener("click", () => select(r.id));
    const item = document.createElement("li");
    item.append(button);
    list.append(item);
  }
  if (!runs.length) list.textContent = "No runs yet.";
}

async function refresh() {
  clearTimeout(state.timer);
  const generation = ++state.generation; // a newer refresh (e.g. another run clicked) wins
  try {
    const runs = (await api("v1/runs?limit=100")).items;
    let run = null, epochs = [];
    if (state.runId) {
      [run, epochs] = await Promise.all([api("v1/runs/" + encodeURIComponent(state.runId)),
        allEpochs(state.runId)]);
    }
    if (generation !== state.generation) return;
    drawRuns(runs);
    state.run = run;
    if (run) drawRun(run, epochs);
    const live = run && ACTIVE.has(run.status);
    setStatus(`updated ${new Date().toLocaleTimeString()}` + (live ? ` · refreshing every ${REFRESH_MS / 1000} s` : ""));
    if (live) state.timer = setTimeout(refresh, REFRESH_MS);
  } catch (err) {
    if (generation !== state.generation) return;
    if (err.status === 401 || err.status === 403) {
      setStatus("The API needs a valid bearer token: paste it above (" + err.message + ").", true);
      $("token-input").focus();
    } else {
      setStatus("Could not load: " + err.message + " (retrying)", true);
      state.timer = setTimeout(refresh, REFRESH_MS);
    }
  }
}

function select(runId) {
  state.runId = runId;
  setHash(runId);
  refresh();
}

function init() {
  const params = hashParams();
  // #token=... is taken once and removed from the address bar (and so from history and bookmarks).
  if (params.get("token")) localStorage.setItem(TOKEN_KEY, params.get("token"));
  state.runId = params.get("run");
  setHash(state.runId);
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token-input").value.trim();
    if (value) localStorage.setItem(TOKEN_KEY, value);
    $("token-input").value = "";
    refresh();
  });
  $("token-forget").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    setStatus("Token removed from this browser.");
  });
  $("refresh").addEventListener("click", refresh);
  refresh();
}

document.addEventListener("DOMContentLoaded", init);
