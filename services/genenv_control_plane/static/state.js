// What the page shows lives in the address fragment, so every view can be linked, bookmarked and reloaded:
//   #run=ID                               a run's curves
//   #run=ID&tasks=EPOCH[&status=rejected] the tasks the simulator wrote in one epoch of that run
//   #experiment=ID                        an experiment's curves per mode
// #token=... is taken once into localStorage and removed from the address bar (and so from history and
// bookmarks); a fragment never reaches the server, so the token stays out of access logs.

import { saveToken } from "./api.js";

export const REFRESH_MS = 3000;

const EMPTY = { runId: null, experimentId: null, tasksEpoch: null, tasksStatus: null };
export const selection = { ...EMPTY };

// The fragment of a selection (also the href of links between views).
export function hashFor(sel) {
  const params = new URLSearchParams();
  if (sel.runId) {
    params.set("run", sel.runId);
    if (sel.tasksEpoch !== null && sel.tasksEpoch !== undefined) {
      params.set("tasks", String(sel.tasksEpoch));
      if (sel.tasksStatus) params.set("status", sel.tasksStatus);
    }
  } else if (sel.experimentId) {
    params.set("experiment", sel.experimentId);
  }
  const hash = params.toString();
  return hash ? "#" + hash : "";
}

// Replaces (not pushes) the history entry: polling and selecting in the sidebar should not pile up entries.
function writeHash() {
  const hash = hashFor(selection);
  history.replaceState(null, "", hash || location.pathname + location.search);
}

export function readHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (params.get("token")) saveToken(params.get("token"));
  const runId = params.get("run");
  const epoch = Number.parseInt(params.get("tasks") ?? "", 10);
  const status = params.get("status");
  Object.assign(selection, EMPTY, {
    runId,
    experimentId: runId ? null : params.get("experiment"),
    tasksEpoch: runId && epoch >= 0 ? epoch : null,
    tasksStatus: status === "valid" || status === "rejected" ? status : null,
  });
  writeHash();
}

let onNavigate = () => {};

// The entry module registers what to do when the selection changes (reload the page's data).
export function whenNavigated(fn) {
  onNavigate = fn;
}

export function navigate(sel) {
  Object.assign(selection, EMPTY, sel);
  writeHash();
  onNavigate();
}

// Polling: every load takes a new generation; an answer that arrives after a newer load began (another run was
// clicked meanwhile) is stale and dropped, and only the newest load may schedule the next one.
let generation = 0;
let timer = null;

export function beginLoad() {
  clearTimeout(timer);
  return ++generation;
}

export const isCurrent = (g) => g === generation;

export function loadAgain(fn) {
  clearTimeout(timer);
  timer = setTimeout(fn, REFRESH_MS);
}
