// The tasks view (#run=ID&tasks=EPOCH): what the simulator wrote in one epoch of a run. Rejected generations show
// their reason; each valid task shows its payload, its p̂ from the difficulty ledger and its attempts (rollouts)
// with their verdicts. Pages of tasks come from the API's cursor; "More" appends the next page.

import { getRun, runEpochs, taskPage, taskRollouts, taskStats } from "./api.js";
import { $, fmt, h, headRow, setStatus } from "./dom.js";
import { rejectionHint } from "./rejections.js";
import { hashFor, isCurrent, navigate, selection } from "./state.js";

export const PAGE_SIZE = 20;

// The list on screen: which selection it shows, the cursor of its next page and the load that drew it.
let shown = null;

// One page of tasks with, per task, its ledger row (or null before scoring) and its attempts. Only valid tasks
// have attempts; one request per task keeps a page's cost bounded by its size, whatever the epoch's size.
async function fetchPage(sel, cursor) {
  const [page, stats] = await Promise.all([
    taskPage(sel.runId, { epoch: sel.tasksEpoch, status: sel.tasksStatus, cursor, limit: PAGE_SIZE }),
    taskStats(sel.runId, sel.tasksEpoch),
  ]);
  const attempts = await Promise.all(
    page.items.map((t) => (t.status === "valid" ? taskRollouts(sel.runId, t.id) : [])));
  const tasks = page.items.map((task, i) => ({ task, stat: stats.get(task.id) || null, rollouts: attempts[i] }));
  return { tasks, next: page.next_cursor };
}

// A verdict as the class the row gets and the words shown (contracts/rollouts.py: an invalid verdict is left out
// of p̂; a valid one with a form error scored 0 because the reply did not parse).
function verdictOf(rollout) {
  const v = rollout.verdict;
  const problem = (e) => (e ? `${e.kind}: ${e.message}` : "");
  if (!v) return { kind: "pending", text: "not verified", note: rollout.error || "" };
  if (!v.valid) return { kind: "invalid", text: "invalid", note: problem(v.error) };
  return { kind: v.success ? "success" : "fail", text: v.success ? "success" : "fail", note: problem(v.form_error) };
}

function attemptsTable(rollouts) {
  if (!rollouts.length) return h("p", { class: "muted no-attempts" }, "no attempts yet");
  const table = h("table", { class: "attempts" });
  headRow(table, ["attempt", "verdict", "score", "response", "note"]);
  const body = table.createTBody();
  for (const r of rollouts) {
    const verdict = verdictOf(r);
    const row = body.insertRow();
    row.className = "verdict-" + verdict.kind;
    row.dataset.verdict = verdict.kind;
    row.dataset.attempt = r.attempt;
    row.insertCell().textContent = String(r.attempt);
    row.insertCell().textContent = verdict.text;
    row.insertCell().textContent = fmt(r.verdict ? r.verdict.score : null);
    row.insertCell().append(h("pre", { class: "response" }, r.response ?? "—"));
    row.insertCell().textContent = verdict.note || "—";
  }
  return table;
}

function taskItem({ task, stat, rollouts }) {
  const item = h("li", { class: "task " + task.status, "data-task-id": task.id, "data-status": task.status });
  const head = h("div", { class: "task-head" });
  const facts = [task.seed_id ? `seed ${task.seed_id}` : "no seed", `variation ${task.variation}`, task.domain];
  if (task.generator_adapter) facts.push(`by ${task.generator_adapter}`);
  if (task.completion_tokens !== null && task.completion_tokens !== undefined) facts.push(`${task.completion_tokens} tokens`);
  head.append(h("strong", {}, `task ${task.id}`), h("span", { class: "status-badge" }, task.status),
    h("span", { class: "muted" }, facts.join(" · ")));
  if (task.status === "valid") {
    head.append(h("span", { class: "p-hat", "data-p-hat": stat ? stat.p_hat : null, "data-k": stat ? stat.k : null,
      "data-n": stat ? stat.n : null },
    stat ? `p̂ ${fmt(stat.p_hat)} (${stat.k} of ${stat.n} valid attempts solved)` : "p̂ — (not scored yet)"));
  }
  item.append(head);
  if (task.status === "rejected") {
    const reason = task.rejection_reason || "unknown";
    item.append(h("p", { class: "rejection", "data-reason": reason },
      `rejected: ${reason}` + (task.rejection_detail ? ` — ${task.rejection_detail}` : "")),
    h("p", { class: "muted rejection-hint" }, `likely fix: ${rejectionHint(reason)}`));
    // What the simulator wrote: the thing the reason is about (shown as text, never interpreted).
    if (task.raw_text) item.append(h("pre", { class: "raw-text" }, task.raw_text));
  }
  // The payload as indented JSON text: whatever the simulator wrote is shown, never interpreted.
  if (task.payload) item.append(h("pre", { class: "payload" }, JSON.stringify(task.payload, null, 2)));
  if (task.status === "valid") item.append(attemptsTable(rollouts));
  return item;
}

function drawMore() {
  $("tasks-more").hidden = !shown.next;
  $("tasks-count").textContent = `${$("task-list").children.length} shown` + (shown.next ? ", more to load" : "");
}

async function more() {
  const button = $("tasks-more");
  const mine = shown;
  button.disabled = true;
  try {
    const page = await fetchPage(mine.sel, mine.next);
    // A newer load (another epoch, filter or a refresh) replaced the list meanwhile: this page belongs to none.
    if (mine !== shown || !isCurrent(mine.generation)) return;
    $("task-list").append(...page.tasks.map(taskItem));
    shown.next = page.next;
    drawMore();
  } catch (err) {
    setStatus("Could not load more tasks: " + err.message, true);
  } finally {
    button.disabled = false;
  }
}

// Wires the controls once; they change the selection (not the list on screen, which may still be loading), and
// the router reloads.
export function init() {
  $("tasks-epoch").addEventListener("change", (e) => navigate({ ...selection, tasksEpoch: Number(e.target.value) }));
  $("tasks-status").addEventListener("change", (e) => navigate({ ...selection, tasksStatus: e.target.value || null }));
  $("tasks-more").addEventListener("click", more);
}

export async function load(sel) {
  const [run, epochs, first] = await Promise.all([getRun(sel.runId), runEpochs(sel.runId), fetchPage(sel, null)]);
  return { sel: { ...sel }, run, epochs, first };
}

// Draws the first page. Never polled (returns false): a list that reloaded itself would lose the reader's pages.
export function draw({ sel, run, epochs, first }, generation) {
  shown = { sel, next: first.next, generation };
  $("tasks-title").textContent = `Generated tasks · ${run.name}`;
  $("tasks-back").href = hashFor({ runId: run.id });
  const epoch = epochs.find((e) => e.index === sel.tasksEpoch);
  const s = epoch && epoch.summary;
  $("tasks-meta").textContent = [`run ${run.id}`, `epoch ${sel.tasksEpoch}` + (epoch ? ` (${epoch.phase})` : ""),
    s ? `${s.tasks_valid} valid, ${s.tasks_rejected} rejected in the epoch summary` : "epoch not summarised yet",
  ].join(" · ");
  const select = $("tasks-epoch");
  const indices = [...new Set([...epochs.map((e) => e.index), sel.tasksEpoch])].sort((a, b) => a - b);
  select.replaceChildren(...indices.map((i) => h("option", { value: i }, `epoch ${i}`)));
  select.value = String(sel.tasksEpoch);
  $("tasks-status").value = sel.tasksStatus || "";
  const list = $("task-list");
  list.replaceChildren(...first.tasks.map(taskItem));
  $("tasks-empty").hidden = first.tasks.length > 0;
  drawMore();
  return false;
}
