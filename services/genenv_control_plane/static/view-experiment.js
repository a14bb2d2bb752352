// The experiment view: the experiment report's figures, per mode the mean over replicates (each replicate faint),
// a legend, and the members table whose buttons open a member's run.

import { experimentSeries, getExperiment } from "./api.js";
import { MODE_ORDER, modeChart, modeClass, swatch } from "./charts.js";
import { $, h, headRow } from "./dom.js";
import { navigate } from "./state.js";
import { ACTIVE } from "./view-run.js";

const isNum = (v) => typeof v === "number" && Number.isFinite(v);
const meanOf = (vs) => vs.reduce((a, b) => a + b, 0) / vs.length;

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

function drawLegend(series) {
  const legend = $("experiment-legend");
  legend.replaceChildren();
  for (const mode of modesOf(series.members)) {
    const n = series.members.filter((m) => m.mode === mode).length;
    const item = h("li", { "data-mode": mode });
    item.append(swatch(modeClass(mode)), document.createTextNode(`${mode} (n = ${n})`));
    legend.append(item);
  }
  const band = h("li", { "data-legend": "band" });
  band.append(swatch("band"), document.createTextNode(`α ± k_min (${series.alpha} ± ${series.k_min})`));
  legend.append(band, h("li", { class: "muted" }, "thick: mean over replicates · thin, faint: each replicate"));
}

function drawMembers(experiment, series) {
  const table = $("member-table");
  table.replaceChildren();
  const closed = new Map(series.members.map((m) => [m.run_id, m.epochs.length]));
  headRow(table, ["mode", "replicate", "random seed", "status", "epochs done", "run", "error"]);
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
    const open = h("button", { type: "button", class: "open-run", title: "show run " + m.run_id }, m.run_id.slice(0, 8));
    open.addEventListener("click", () => navigate({ runId: m.run_id }));
    row.insertCell().append(open);
    row.insertCell().textContent = m.error || "—";
  }
}

export async function load(sel) {
  const [experiment, series] = await Promise.all([getExperiment(sel.experimentId), experimentSeries(sel.experimentId)]);
  return { experiment, series };
}

// Draws the experiment; true while it can still change (the page then polls).
export function draw({ experiment, series }) {
  $("experiment-title").textContent = `${experiment.name} · ${experiment.status}`;
  const modes = modesOf(series.members);
  const meta = [`id ${experiment.id}`, `domain ${series.domain}`,
    `${modes.length} modes × ${experiment.replicates} replicates`, `${series.epochs} epochs`,
    experiment.concurrent ? "concurrent" : "one member after another", `α ${series.alpha}`, `k_min ${series.k_min}`];
  if (series.heldout_benchmark) meta.push(`held-out ${series.heldout_benchmark}`);
  $("experiment-meta").textContent = meta.join(" · ");
  drawLegend(series);
  const epochs = series.members.flatMap((m) => m.epochs.map((e) => e.epoch));
  const band = { alpha: series.alpha, kMin: series.k_min };
  $("experiment-charts").replaceChildren(...experimentCharts(series).map((chart) => modeChart({
    id: chart.id, title: chart.title, unit: chart.unit, band: chart.band ? band : null, epochs,
    curves: modeCurves(chart, series), xLabel: chart.x ? chart.xLabel : null,
    target: chart.id === "data_efficiency" ? dataEfficiencyTarget(series) : null,
  })));
  drawMembers(experiment, series);
  return ACTIVE.has(experiment.status);
}
