// The experiment view: the experiment report's figures, per mode the mean over replicates (each replicate faint),
// a legend, and the members table whose buttons open a member's run.

import { experimentSeries, getExperiment } from "./api.js";
import { modeChart, modeClass, swatch } from "./charts.js";
import { $, h, headRow } from "./dom.js";
import { navigate } from "./state.js";
import { ACTIVE } from "./view-run.js";

const isNum = (v) => typeof v === "number" && Number.isFinite(v);

// Every number of a mode is the server's (ExperimentSeries.modes, in the report's mode order: per epoch, the mean
// over the replicates that have it; heldout_target): genenv.experiments.series computes them for the report and
// this page alike, so this view only draws.

// The experiment report's figures: `y` reads a member's epoch (a replicate's faint trace) and `mean` a mode's epoch
// (ExperimentSeries.modes[].epochs[]), giving {mean, n} or nothing; `x`/`xMean` likewise, else the epoch.
function experimentCharts(series) {
  const key = (k) => (e) => e[k];
  const metric = (k) => (me) => me.metrics[k];
  const described = series.difficulty_measures || {};
  const measures = [...new Set([...Object.keys(described),
    ...(series.modes || []).flatMap((m) => m.epochs.flatMap((e) => Object.keys(e.difficulty)))])].sort();
  const chart = (id, title, unit, k, extra) => ({ id, title, unit, y: key(k), mean: metric(k), ...extra });
  return [
    chart("p_hat", "p̂ on generated tasks (α ± k_min shaded)", "share", "p_hat", { band: true }),
    chart("in_band", "Seed batches inside the α band", "share", "in_band_share"),
    chart("heldout", `Held-out accuracy (${series.heldout_benchmark || "no held-out benchmark"})`, "share",
      "heldout_accuracy"),
    chart("data_efficiency", "Held-out accuracy vs generated tasks (data efficiency)", "share", "heldout_accuracy",
      { x: key("generated_tasks_so_far"), xMean: metric("generated_tasks_so_far"),
        xLabel: "generated tasks so far" }),
    ...measures.map((m) => ({ id: "difficulty:" + m, unit: "value", y: (e) => (e.difficulty || {})[m],
      mean: (me) => me.difficulty[m], title: `Task difficulty: ${m}` + (described[m] ? ` (${described[m]})` : "") })),
    chart("response_length", "Mean agent response length (tokens)", "count", "mean_response_tokens"),
  ];
}

// Per mode: every replicate's points and the server's means (a point where the mode has both x and y).
function modeCurves(chart, series) {
  const xOf = chart.x || ((e) => e.epoch);
  const xMean = chart.xMean || ((me) => ({ mean: me.epoch }));
  return (series.modes || []).map(({ mode, epochs }) => {
    const members = series.members.filter((m) => m.mode === mode).sort((a, b) => a.replicate - b.replicate);
    const replicates = members.map((m) => ({ member: m, pts: m.epochs
      .filter((e) => isNum(chart.y(e)) && isNum(xOf(e))).map((e) => [xOf(e), chart.y(e), e.epoch]) }));
    const means = epochs.map((me) => ({ epoch: me.epoch, x: xMean(me), y: chart.mean(me) }))
      .filter((p) => p.x && p.y).map((p) => ({ epoch: p.epoch, x: p.x.mean, y: p.y.mean, n: p.y.n }));
    return { mode, replicates, means };
  });
}

function drawLegend(series) {
  const legend = $("experiment-legend");
  legend.replaceChildren();
  for (const { mode, replicates: n } of series.modes || []) {
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
  const modes = series.modes || [];
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
    target: chart.id === "data_efficiency" ? series.heldout_target ?? null : null,
  })));
  drawMembers(experiment, series);
  return ACTIVE.has(experiment.status);
}
