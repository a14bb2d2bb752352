// GenEnv dashboard: lists runs and experiments and draws a run's per-epoch curves, or an experiment's curves per
// mode (mean over replicates, each replicate faint), as inline SVG from the JSON API.
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

// The experiment view's modes in the report's order; each mode's colour is the CSS class m-<mode> (dashboard.css),
// the mapping of the report's figures (genenv.experiments.figures.MODE_COLOURS).
const MODE_ORDER = ["genenv", "random_simulator", "static_augmentation", "agent_only"];

const state = { runId: null, run: null, experimentId: null, timer: null, generation: 0 };
const $ = (id) => document.getElementById(id);

function token() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

function setHash(runId, experimentId) {
  const params = new URLSearchParams();
  if (runId) params.set("run", runId);
  else if (experimentId) params.set("experiment", experimentId);
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

// The y axis of a unit: shares span [0, 1]; counts and scores get round ticks up to the largest value.
function yAxis(unit, values) {
  const top = Math.max(0, ...values);
  const step = unit === "share" ? 0.25 : tickStep(top, unit === "count");
  return { step, max: unit === "share" ? 1 : step * Math.max(1, Math.ceil(top / step - 1e-9)) };
}

// An epoch x axis over the epochs present (at least two wide), at most ~10 labels.
function epochAxis(indices) {
  const x0 = indices.length ? Math.min(...indices) : 0;
  const x1 = Math.max(indices.length ? Math.max(...indices) : 1, x0 + 1);
  return { min: x0, max: x1, step: Math.max(1, Math.ceil((x1 - x0 + 1) / 10)), label: "epoch" };
}

// A chart without data: figure, caption, grid, ticks, the α ± k_min band when `band` is given, and the axes.
// Returns the figure, its svg and the data → pixel scales.
function frame(id, title, x, y, band) {
  const px = (v) => M.left + ((v - x.min) / (x.max - x.min)) * (W - M.left - M.right);
  const py = (v) => H - M.bottom - (v / y.max) * (H - M.top - M.bottom);
  const figure = document.createElement("figure");
  figure.className = "chart";
  figure.dataset.chart = id;
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  figure.append(caption, svg);

  const grid = el("g", { class: "grid" });
  const ticks = el("g");
  for (let i = 0; i * y.step <= y.max + 1e-9; i++) {
    const v = i * y.step;
    grid.append(el("line", { x1: M.left, x2: W - M.right, y1: py(v), y2: py(v) }));
    ticks.append(el("text", { class: "tick", x: M.left - 6, y: py(v) + 4, "text-anchor": "end" }, tickLabel(v)));
  }
  for (let v = x.min; v <= x.max + 1e-9; v += x.step) {
    ticks.append(el("text", { class: "tick", x: px(v), y: H - M.bottom + 16, "text-anchor": "middle" }, tickLabel(v)));
  }
  ticks.append(el("text", { class: "tick", x: W - M.right, y: H - 2, "text-anchor": "end" }, x.label));
  svg.append(grid);

  if (band) {
    const lo = Math.max(0, band.alpha - band.kMin), hi = Math.min(1, band.alpha + band.kMin);
    svg.append(el("rect", { class: "band", "data-lo": lo, "data-hi": hi,
      x: M.left, width: W - M.left - M.right, y: py(hi), height: py(lo) - py(hi) }));
    svg.append(el("line", { class: "alpha", x1: M.left, x2: W - M.right, y1: py(band.alpha), y2: py(band.alpha) }));
  }
  svg.append(el("path", { class: "axis", d: `M${M.left},${M.top}V${H - M.bottom}H${W - M.right}` }));
  svg.append(ticks);
  return { figure, svg, px, py };
}

function pathOf(pts, px, py) {
  return pts.map(([x, y], j) => `${j ? "L" : "M"}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join("");
}

function emptyNote(svg, text) {
  svg.append(el("text", { class: "empty", x: W / 2, y: H / 2, "text-anchor": "middle" }, text));
}

function drawChart(chart, epochs, config) {
  const series = seriesOf(chart, epochs);
  const values = series.flatMap(([, pts]) => pts.map((p) => p[1]));
  const band = chart.band && config ? { alpha: config.curriculum.alpha, kMin: config.curriculum.k_min } : null;
  const { figure, svg, px, py } = frame(chart.id, chart.title, epochAxis(epochs.map((e) => e.index)),
    yAxis(chart.unit, values), band);

  series.forEach(([label, pts], i) => {
    const cls = "s" + (i % 6);
    if (pts.length) {
      svg.append(el("path", { class: "series " + cls, d: pathOf(pts, px, py), "data-series": label,
        "data-points": pts.length }));
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
  if (!values.length) emptyNote(svg, chart.series === "benchmarks" ? "no evaluations yet" : "no finished epoch yet");
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

// One sidebar list (runs or experiments): a button per item showing its status and name (text only).
function drawList(listId, items, { dataKey, selectedId, title, onSelect, empty }) {
  const list = $(listId);
  list.replaceChildren();
  for (const x of items) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset[dataKey] = x.id;
    button.classList.toggle("selected", x.id === selectedId);
    const status = document.createElement("span");
    status.className = "status";
    status.textContent = x.status;
    button.append(status, document.createTextNode(x.name));
    button.title = title(x);
    button.addEventListener("click", () => onSelect(x.id));
    const item = document.createElement("li");
    item.append(button);
    list.append(item);
  }
  if (!items.length) list.textContent = empty;
}

function drawRuns(runs) {
  drawList("run-list", runs, {
    dataKey: "runId", selectedId: state.runId, title: (r) => r.id, onSelect: select, empty: "No runs yet.",
  });
}

// ------------------------------------------------------------------------------------------------ experiments

const isNum = (v) => typeof v === "number" && Number.isFinite(v);
const meanOf = (vs) => vs.reduce((a, b) => a + b, 0) / vs.length;
const modeClass = (mode) => "m-" + (MODE_ORDER.includes(mode) ? mode : "other");

// The modes present, in the report's order (an unknown mode from a newer server last, alphabetically).
function modesOf(members) {
  const present = new Set(members.map((m) => m.mode));
  return [...MODE_ORDER.filter((m) => present.has(m)), ...[...present].filter((m) => !MODE_ORDER.includes(m)).sort()];
}

// The experiment report's figures: `y` (and `x`, else the epoch) read a member's epoch; null/absent is no point.
function experimentCharts(series) {
  const key = (k) => (e) => e[k];
  const described = series.difficulty_measures || {};
  const measures = [...new Set([...Object.keys(described),
    ...series.members.flatMap((m) => m.epochs.flatMap((e) => Object.keys(e.difficulty || {})))])].sort();
  return [
    { id: "p_hat", title: "p̂ on generated tasks (α ± k_min shaded)", unit: "share", band: true, y: key("p_hat") },
    { id: "in_band", title: "Seed batches inside the α band", unit: "share", y: key("in_band_share") },
    { id: "heldout", title: `Held-out accuracy (${series.heldout_benchmark || "no held-out benchmark"})`,
      unit: "share", y: key("heldout_accuracy") },
    { id: "data_efficiency", title: "Held-out accuracy vs generated tasks (data efficiency)", unit: "share",
      y: key("heldout_accuracy"), x: key("generated_tasks_so_far"), xLabel: "generated tasks so far" },
    ...measures.map((m) => ({ id: "difficulty:" + m, unit: "value", y: (e) => (e.difficulty || {})[m],
      title: `Task difficulty: ${m}` + (described[m] ? ` (${described[m]})` : "") })),
    { id: "response_length", title: "Mean agent response length (tokens)", unit: "count",
      y: key("mean_response_tokens") },
  ];
}

// Per mode: every replicate's points and, per epoch, the mean over the replicates that have the number there
// (x and y averaged separately, as the report's per-epoch statistics and data_efficiency.png do).
function modeCurves(chart, series) {
  const xOf = chart.x || ((e) => e.epoch);
  return modesOf(series.members).map((mode) => {
    const members = series.members.filter((m) => m.mode === mode).sort((a, b) => a.replicate - b.replicate);
    const replicates = members.map((m) => ({ member: m, pts: m.epochs
      .filter((e) => isNum(chart.y(e)) && isNum(xOf(e))).map((e) => [xOf(e), chart.y(e), e.epoch]) }));
    const byEpoch = new Map();
    for (const m of members) {
      for (const e of m.epochs) {
        if (!byEpoch.has(e.epoch)) byEpoch.set(e.epoch, []);
        byEpoch.get(e.epoch).push(e);
      }
    }
    const means = [];
    for (const epoch of [...byEpoch.keys()].sort((a, b) => a - b)) {
      const rows = byEpoch.get(epoch);
      const ys = rows.map(chart.y).filter(isNum), xs = rows.map(xOf).filter(isNum);
      if (ys.length && xs.length) means.push({ epoch, x: meanOf(xs), y: meanOf(ys), n: ys.length });
    }
    return { mode, replicates, means };
  });
}

// static_augmentation's mean final held-out accuracy: the level data_efficiency.png marks as the target.
function dataEfficiencyTarget(series) {
  const finals = series.members.filter((m) => m.mode === "static_augmentation")
    .map((m) => m.epochs.filter((e) => isNum(e.heldout_accuracy)).map((e) => e.heldout_accuracy).pop())
    .filter(isNum);
  return finals.length ? meanOf(finals) : null;
}

function drawExperimentChart(chart, series) {
  const curves = modeCurves(chart, series);
  const target = chart.id === "data_efficiency" ? dataEfficiencyTarget(series) : null;
  const ys = curves.flatMap((c) => c.replicates.flatMap((r) => r.pts.map((p) => p[1])));
  let x;
  if (chart.x) {
    const top = Math.max(0, ...curves.flatMap((c) => c.replicates.flatMap((r) => r.pts.map((p) => p[0]))));
    const step = tickStep(top, true);
    x = { min: 0, max: step * Math.max(1, Math.ceil(top / step - 1e-9)), step, label: chart.xLabel };
  } else {
    x = epochAxis(series.members.flatMap((m) => m.epochs.map((e) => e.epoch)));
  }
  const band = chart.band ? { alpha: series.alpha, kMin: series.k_min } : null;
  const { figure, svg, px, py } = frame(chart.id, chart.title, x, yAxis(chart.unit, ys), band);

  if (target !== null) {
    const line = el("line", { class: "target " + modeClass("static_augmentation"), "data-value": target,
      x1: M.left, x2: W - M.right, y1: py(target), y2: py(target) });
    line.append(el("title", {}, `static_augmentation final held-out accuracy: ${fmt(target)}`));
    svg.append(line);
  }
  const at = (pt) => (chart.x ? `epoch ${pt.epoch}, ${fmt(pt.x)} tasks` : `epoch ${pt.epoch}`);
  for (const { mode, replicates, means } of curves) {
    const g = el("g", { class: "mode " + modeClass(mode), "data-mode": mode });
    for (const { member, pts } of replicates) {
      if (!pts.length) continue;
      g.append(el("path", { class: "replicate", d: pathOf(pts, px, py), "data-replicate": member.replicate,
        "data-points": pts.length }));
      for (const [vx, vy, epoch] of pts) {
        const dot = el("circle", { class: "replicate", cx: px(vx), cy: py(vy), r: 2,
          "data-replicate": member.replicate, "data-epoch": epoch, "data-y": vy });
        dot.append(el("title", {}, `${mode} replicate ${member.replicate} · ${at({ epoch, x: vx })}: ${fmt(vy)}`));
        g.append(dot);
      }
    }
    if (means.length) {
      g.append(el("path", { class: "mean", d: pathOf(means.map((m) => [m.x, m.y]), px, py), "data-mode": mode,
        "data-points": means.length }));
      for (const m of means) {
        const dot = el("circle", { class: "mean", cx: px(m.x), cy: py(m.y), r: 3.5, "data-mode": mode,
          "data-epoch": m.epoch, "data-x": m.x, "data-y": m.y, "data-n": m.n });
        dot.append(el("title", {}, `${mode} mean of ${m.n} · ${at(m)}: ${fmt(m.y)}`));
        g.append(dot);
      }
    }
    svg.append(g);
  }
  if (!ys.length) emptyNote(svg, "no data yet");
  return figure;
}

function swatch(cls) {
  const svg = el("svg", { class: "swatch " + cls, viewBox: "0 0 14 14", width: 14, height: 14, "aria-hidden": "true" });
  svg.append(el("rect", { x: 1, y: 1, width: 12, height: 12 }));
  return svg;
}

function drawLegend(series) {
  const legend = $("experiment-legend");
  legend.replaceChildren();
  for (const mode of modesOf(series.members)) {
    const item = document.createElement("li");
    item.dataset.mode = mode;
    const n = series.members.filter((m) => m.mode === mode).length;
    item.append(swatch(modeClass(mode)), document.createTextNode(`${mode} (n = ${n})`));
    legend.append(item);
  }
  const band = document.createElement("li");
  band.dataset.legend = "band";
  band.append(swatch("band"), document.createTextNode(`α ± k_min (${series.alpha} ± ${series.k_min})`));
  const note = document.createElement("li");
  note.className = "muted";
  note.textContent = "thick: mean over replicates · thin, faint: each replicate";
  legend.append(band, note);
}

function drawMembers(experiment, series) {
  const table = $("member-table");
  table.replaceChildren();
  const closed = new Map(series.members.map((m) => [m.run_id, m.epochs.length]));
  const head = table.createTHead().insertRow();
  for (const name of ["mode", "replicate", "random seed", "status", "epochs done", "run", "error"]) {
    const th = document.createElement("th");
    th.textContent = name;
    head.append(th);
  }
  const body = table.createTBody();
  for (const m of experiment.members) {
    const row = body.insertRow();
    row.dataset.runId = m.run_id;
    row.dataset.mode = m.mode;
    const mode = row.insertCell();
    mode.className = "mode-cell";
    mode.append(swatch(modeClass(m.mode)), document.createTextNode(m.mode));
    for (const c of [m.replicate, m.random_seed, m.status, `${closed.get(m.run_id) || 0}/${series.epochs}`]) {
      row.insertCell().textContent = String(c);
    }
    const open = document.createElement("button");
    open.type = "button";
    open.className = "open-run";
    open.title = "show run " + m.run_id;
    open.textContent = m.run_id.slice(0, 8);
    open.addEventListener("click", () => select(m.run_id));
    row.insertCell().append(open);
    row.insertCell().textContent = m.error || "—";
  }
}

function drawExperiment(experiment, series) {
  $("experiment-title").textContent = `${experiment.name} · ${experiment.status}`;
  const modes = modesOf(series.members);
  const meta = [`id ${experiment.id}`, `domain ${series.domain}`,
    `${modes.length} modes × ${experiment.replicates} replicates`, `${series.epochs} epochs`,
    experiment.concurrent ? "concurrent" : "one member after another", `α ${series.alpha}`, `k_min ${series.k_min}`];
  if (series.heldout_benchmark) meta.push(`held-out ${series.heldout_benchmark}`);
  $("experiment-meta").textContent = meta.join(" · ");
  drawLegend(series);
  $("experiment-charts").replaceChildren(...experimentCharts(series).map((c) => drawExperimentChart(c, series)));
  drawMembers(experiment, series);
}

function drawExperiments(experiments) {
  drawList("experiment-list", experiments, {
    dataKey: "experimentId", selectedId: state.experimentId,
    title: (x) => `${x.id} · ${x.modes.join(", ")} × ${x.replicates}`, onSelect: selectExperiment,
    empty: "No experiments yet.",
  });
}

// ---------------------------------------------------------------------------------------------------- loading

async function refresh() {
  clearTimeout(state.timer);
  const generation = ++state.generation; // a newer refresh (e.g. another run clicked) wins
  try {
    const [runs, experiments] = (await Promise.all([api("v1/runs?limit=100"), api("v1/experiments?limit=100")]))
      .map((page) => page.items);
    let run = null, epochs = [], experiment = null, series = null;
    if (state.runId) {
      [run, epochs] = await Promise.all([api("v1/runs/" + encodeURIComponent(state.runId)),
        allEpochs(state.runId)]);
    } else if (state.experimentId) {
      const path = "v1/experiments/" + encodeURIComponent(state.experimentId);
      [experiment, series] = await Promise.all([api(path), api(path + "/series")]);
    }
    if (generation !== state.generation) return;
    drawRuns(runs);
    drawExperiments(experiments);
    $("run").hidden = Boolean(experiment);
    $("experiment").hidden = !experiment;
    state.run = run;
    if (run) drawRun(run, epochs);
    if (experiment) drawExperiment(experiment, series);
    const live = (run && ACTIVE.has(run.status)) || (experiment && ACTIVE.has(experiment.status));
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
  state.experimentId = null;
  setHash(runId, null);
  refresh();
}

function selectExperiment(experimentId) {
  state.runId = null;
  state.experimentId = experimentId;
  setHash(null, experimentId);
  refresh();
}

// #run=ID or #experiment=ID selects what is shown; #token=... is taken once and removed from the address bar
// (and so from history and bookmarks).
function fromHash() {
  const params = hashParams();
  if (params.get("token")) localStorage.setItem(TOKEN_KEY, params.get("token"));
  state.runId = params.get("run");
  state.experimentId = state.runId ? null : params.get("experiment");
  setHash(state.runId, state.experimentId);
}

function init() {
  fromHash();
  // A link or an edited address (#experiment=ID) switches the view without a reload.
  window.addEventListener("hashchange", () => {
    fromHash();
    refresh();
  });
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
