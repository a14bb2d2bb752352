// Every call of the control plane's REST API (docs/api.md) goes through get(): one place that adds the bearer
// token and turns a non-2xx answer into an ApiError with the HTTP status and the error envelope's message.

export const TOKEN_KEY = "genenv.dashboard.token";
const MAX_PAGE = 500; // the API's largest `limit`

export const token = () => localStorage.getItem(TOKEN_KEY) || "";
export const saveToken = (value) => localStorage.setItem(TOKEN_KEY, value);
export const forgetToken = () => localStorage.removeItem(TOKEN_KEY);

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

// GET a path relative to the page (so a control plane behind a path prefix works); null/undefined query values
// are left out rather than sent as "null".
async function get(resource, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) if (v !== null && v !== undefined) params.set(k, String(v));
  const qs = params.toString();
  const path = qs ? `${resource}?${qs}` : resource;
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  const res = await fetch(path, { headers, cache: "no-store" });
  if (!res.ok) {
    let message = "HTTP " + res.status;
    try {
      message = (await res.json()).error.message;
    } catch (_) { /* not an error envelope */ }
    throw new ApiError(message, res.status);
  }
  return res.json();
}

// Every item of a paginated list, following next_cursor (contracts/pagination.py).
async function allPages(resource, query) {
  const items = [];
  let cursor = null;
  do {
    const page = await get(resource, { ...query, limit: MAX_PAGE, cursor });
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

const run = (id) => "v1/runs/" + encodeURIComponent(id);
const experiment = (id) => "v1/experiments/" + encodeURIComponent(id);

export const listRuns = async () => (await get("v1/runs?limit=100")).items;
export const listExperiments = async () => (await get("v1/experiments?limit=100")).items;
export const getRun = (id) => get(run(id));
export const runEpochs = (id) => allPages(run(id) + "/epochs");
export const getExperiment = (id) => get(experiment(id));
export const experimentSeries = (id) => get(experiment(id) + "/series");

// One page of a run's generated tasks of one epoch; status "valid" | "rejected" | null (both).
export const taskPage = (runId, { epoch, status, cursor, limit }) =>
  get(run(runId) + "/tasks", { epoch, status: status || null, cursor, limit });
// A task's attempts in attempt order, each with its verdict (null until the verify phase).
export const taskRollouts = (runId, taskId) => allPages(run(runId) + "/rollouts", { task_id: taskId });
// The difficulty ledger of an epoch's tasks: RunStat rows keyed by task id (p̂ = k/n of valid verdicts).
export const taskStats = async (runId, epoch) =>
  new Map((await allPages(run(runId) + "/stats", { kind: "task", epoch })).map((s) => [Number(s.key), s]));
