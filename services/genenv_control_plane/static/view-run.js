// The run view: a run's per-epoch curves from its epoch summaries, and per epoch its adapter versions, phase wall
// times, its rejected generations per reason (with the likely fix of each under the table) and a link to the tasks
// the simulator wrote in that epoch (view-tasks.js).

import { getRun, runEpochs } from "./api.js";
import { epochChart } from "./charts.js";
import { $, h, headRow } from "./dom.js";
import { rejectionCounts, rejectionHint } from "./rejections.js";
import { hashFor } from "./state.js";

export const ACTIVE = new Set(["created", "running"]); // statuses whose epochs can still change
const PHASES = ["generate", "rollout", "verify", "score", "train", "publish", "evaluate", "close"];

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

// Under the table, once per reason any epoch rejected generations for: the reason and its likely fix.
function drawRejectionHints(epochs) {
  const reasons = [...new Set(epochs.flatMap((e) => rejectionCounts(e.summary).map(([reason]) => reason)))];
  $("rejection-hints").replaceChildren(...reasons.map((reason) => h("li", { "data-reason": reason },
    `${reason}: ${rejectionHint(reason)}`)));
}

function drawTable(run, epochs) {
  const table = $("epoch-table");
  table.replaceChildren();
  $("table-title").hidden = !epochs.length;
  drawRejectionHints(epochs);
  if (!epochs.length) return;
  const seen = new Set(epochs.flatMap((e) => Object.keys((e.summary && e.summary.phase_seconds) || {})));
  const phases = [...PHASES.filter((p) => seen.has(p)), ...[...seen].filter((p) => !PHASES.includes(p)).sort()];
  headRow(table, ["epoch", "phase", "agent v", "simulator v", ...phases, "total", "rejected", "generated"]);
  const body = table.createTBody();
  for (const e of epochs) {
    const s = e.summary || {};
    const secs = s.phase_seconds || {};
    const total = Object.values(secs).reduce((a, b) => a + b, 0);
    const cells = [e.index, e.phase, s.agent_adapter_version, s.simulator_adapter_version,
      ...phases.map((p) => (p in secs ? secs[p].toFixed(1) : null)), e.summary ? total.toFixed(1) : null];
    const row = body.insertRow();
    for (const c of cells) row.insertCell().textContent = c === null || c === undefined ? "—" : String(c);
    const counts = rejectionCounts(e.summary);
    const rejected = row.insertCell();
    rejected.className = "rejections";
    rejected.textContent = counts.length ? counts.map(([reason, n]) => `${reason} ${n}`).join(" · ") : "—";
    if (counts.length) rejected.title = counts.map(([reason]) => `${reason}: ${rejectionHint(reason)}`).join("\n");
    // A plain link: the hash router (state.js) opens the view, and Back returns here.
    row.insertCell().append(h("a", { class: "tasks-link", href: hashFor({ runId: run.id, tasksEpoch: e.index }),
      "data-epoch": e.index }, "tasks"));
  }
}

// What a run waits for, in the words of `genenv runs watch` (genenv.cli.render.waiting_line).
export function waitingLine(w) {
  const since = new Date(w.since).toISOString().slice(11, 19);
  const tries = w.attempts === 1 ? "1 try" : `${w.attempts} tries`;
  return `waiting on ${w.dependency} since ${since} UTC (${tries}; ${w.phase} of epoch ${w.epoch}): ${w.last_error}`;
}

export async function load(sel) {
  const [run, epochs] = await Promise.all([getRun(sel.runId), runEpochs(sel.runId)]);
  return { run, epochs };
}

// Draws the run; true while the run can still change (the page then polls).
export function draw({ run, epochs }) {
  const c = run.config;
  $("run-title").textContent = `${run.name} · ${run.status}`;
  const meta = [`id ${run.id}`, `mode ${c.mode}`, `domain ${c.domain}`,
    `epoch ${Math.min(run.current_epoch + 1, c.epochs)}/${c.epochs}`,
    `α ${c.curriculum.alpha}`, `k_min ${c.curriculum.k_min}`];
  if (run.error) meta.push(`error: ${run.error}`);
  $("run-meta").textContent = meta.join(" · ");
  const waiting = $("run-waiting");
  waiting.hidden = !run.waiting_on;
  waiting.textContent = run.waiting_on ? waitingLine(run.waiting_on) : "";
  const band = { alpha: c.curriculum.alpha, kMin: c.curriculum.k_min };
  $("charts").replaceChildren(...CHARTS.map((chart) => epochChart({
    id: chart.id, title: chart.title, unit: chart.unit, band: chart.band ? band : null,
    series: seriesOf(chart, epochs), epochs: epochs.map((e) => e.index),
    empty: chart.series === "benchmarks" ? "no evaluations yet" : "no finished epoch yet",
  })));
  drawTable(run, epochs);
  return ACTIVE.has(run.status);
}
