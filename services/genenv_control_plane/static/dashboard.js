// GenEnv dashboard, the entry module: the sidebar (runs and experiments), the token form, and the loop that loads
// the view the address names (state.js) and polls while what it shows can still change. Each view module has
// load(selection) → data (API calls only) and draw(data) → whether to poll, so a slow answer never draws half.
// No external assets (CSP allows this origin only); all text goes through textContent, never innerHTML.

import { forgetToken, listExperiments, listRuns, saveToken } from "./api.js";
import { $, h, setStatus } from "./dom.js";
import { beginLoad, isCurrent, loadAgain, navigate, readHash, REFRESH_MS, selection, whenNavigated } from "./state.js";
import * as experimentView from "./view-experiment.js";
import * as runView from "./view-run.js";
import * as tasksView from "./view-tasks.js";

// Each view and the <section> it draws into; with nothing selected the run section's prompt shows.
const SECTIONS = new Map([[runView, "run"], [experimentView, "experiment"], [tasksView, "tasks"]]);

function viewOf(sel) {
  if (sel.runId) return sel.tasksEpoch === null ? runView : tasksView;
  return sel.experimentId ? experimentView : null;
}

// One sidebar list (runs or experiments): a button per item showing its status and name (text only).
function drawList(listId, items, { dataKey, selectedId, title, onSelect, empty }) {
  const list = $(listId);
  list.replaceChildren();
  for (const x of items) {
    const button = h("button", { type: "button", title: title(x) });
    button.dataset[dataKey] = x.id;
    button.classList.toggle("selected", x.id === selectedId);
    button.append(h("span", { class: "status" }, x.status), document.createTextNode(x.name));
    button.addEventListener("click", () => onSelect(x.id));
    const item = h("li");
    item.append(button);
    list.append(item);
  }
  if (!items.length) list.textContent = empty;
}

function drawSidebar(runs, experiments) {
  drawList("run-list", runs, {
    dataKey: "runId", selectedId: selection.runId, title: (r) => r.id, empty: "No runs yet.",
    onSelect: (runId) => navigate({ runId }),
  });
  drawList("experiment-list", experiments, {
    dataKey: "experimentId", selectedId: selection.experimentId,
    title: (x) => `${x.id} · ${x.modes.join(", ")} × ${x.replicates}`, empty: "No experiments yet.",
    onSelect: (experimentId) => navigate({ experimentId }),
  });
}

async function refresh() {
  const generation = beginLoad(); // a newer refresh (e.g. another run clicked) wins
  try {
    const view = viewOf(selection);
    const [runs, experiments, data] = await Promise.all([listRuns(), listExperiments(),
      view ? view.load({ ...selection }) : null]);
    if (!isCurrent(generation)) return;
    drawSidebar(runs, experiments);
    const visible = view ? SECTIONS.get(view) : "run";
    for (const id of SECTIONS.values()) $(id).hidden = id !== visible;
    const live = view ? view.draw(data, generation) : false;
    setStatus(`updated ${new Date().toLocaleTimeString()}` + (live ? ` · refreshing every ${REFRESH_MS / 1000} s` : ""));
    if (live) loadAgain(refresh);
  } catch (err) {
    if (!isCurrent(generation)) return;
    if (err.status === 401 || err.status === 403) {
      setStatus("The API needs a valid bearer token: paste it above (" + err.message + ").", true);
      $("token-input").focus();
    } else {
      setStatus("Could not load: " + err.message + " (retrying)", true);
      loadAgain(refresh);
    }
  }
}

function init() {
  readHash();
  whenNavigated(refresh);
  tasksView.init();
  // A link (the run view's per-epoch "tasks") or an edited address switches the view without a reload.
  window.addEventListener("hashchange", () => {
    readHash();
    refresh();
  });
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token-input").value.trim();
    if (value) saveToken(value);
    $("token-input").value = "";
    refresh();
  });
  $("token-forget").addEventListener("click", () => {
    forgetToken();
    setStatus("Token removed from this browser.");
  });
  $("refresh").addEventListener("click", refresh);
  refresh();
}

// A module script runs once the document is parsed (it is deferred), so the elements exist already.
init();
