// Per rejection reason the likely fix: a copy of genenv.rejections.REJECTION_HINTS (a test checks the two agree),
// shown under the run's epoch table and beside each rejected task.

export const REJECTION_HINTS = {
  "not_json": "the model did not write a JSON object: a larger base model (qwen2.5-coder-0.5b-instruct) or a lower simulator_temperature",
  "schema_error": "the JSON misses fields or has wrong types: a larger base model (qwen2.5-coder-0.5b-instruct) that follows the task schema",
  "invalid_task": "the model does not follow the task schema (the domain's validator refuses the task): a larger base model (qwen2.5-coder-0.5b-instruct)",
  "duplicate": "variations repeat one another: raise simulator_temperature or lower variations_per_seed",
  "too_long": "raise simulator max_task_tokens or use a larger base model (qwen2.5-coder-0.5b-instruct)",
  "empty": "the model wrote nothing: check that the base model is an instruct (chat) model, or raise max_task_tokens",
  "generation_error": "the inference server failed the request (timeout, server error, unknown adapter): see the simulator's and the inference server's logs",
  "repeat": "the simulator rewrote a valid task of an earlier epoch word for word (simulator.reject_repeats is on): expected now and then; if most are repeats, raise simulator_temperature"
};

export const UNKNOWN_HINT = "see the rejected generations: genenv runs tasks RUN --epoch N --status rejected";

export const rejectionHint = (reason) => REJECTION_HINTS[reason] || UNKNOWN_HINT;

// An epoch summary's rejections as [reason, count] pairs, commonest first (ties by name, as the CLI orders them).
export function rejectionCounts(summary) {
  return Object.entries((summary && summary.rejections) || {})
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}
