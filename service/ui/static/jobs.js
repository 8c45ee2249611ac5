// The jobs the console follows: polled at GET /jobs/{id} while they run, cancelled with DELETE, retried with POST.
//
// Followed are the jobs started here and those given by id (or picked in the list of recent jobs). Their ids (not
// the key) are kept in sessionStorage, so that a reload keeps following them. An id the server does not know (a
// typo, or a finished job past its retention) is shown as "not found" once and no longer asked for.

import { api, path } from "./api.js";
import { byId } from "./dom.js";
import { jobRows } from "./job_rows.js";

const IDS_ITEM = "vela.jobs";
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const NOT_FOUND = "not_found";
const POLL_MS = 500;
// After a round that failed (server unreachable, a 5xx), the next one waits twice as long, up to this.
const MAX_RETRY_MS = 30000;
const MAX_FOLLOWED = 20;

const jobs = new Map(); // id -> the last JobOut seen (or a stub while the first GET is under way)
let timer = null;
let polling = false;
let pollAgain = false;
let failedRounds = 0; // rounds in a row that ended with an error other than 404 or 401
let finished = () => {};

/** Called with each job the first time it is seen to have ended (to refresh the collections, say). */
export function onJobEnded(handler) {
  finished = handler;
}

export function restoreJobs() {
  let ids = [];
  try {
    ids = JSON.parse(sessionStorage.getItem(IDS_ITEM) || "[]");
  } catch {
    // Not what this page stored (edited by hand, or an older page's format): start with no jobs followed.
  }
  if (!Array.isArray(ids)) ids = [];
  for (const id of ids.filter((x) => typeof x === "string").slice(-MAX_FOLLOWED)) {
    jobs.set(id, { id, status: "queued", stub: true });
  }
  draw();
  poll();
}

/** Starts following a job: `job` is a JobOut, or `{id}` alone. */
export function followJob(job) {
  jobs.delete(job.id);
  jobs.set(job.id, { status: "queued", stub: !job.collection, ...job });
  while (jobs.size > MAX_FOLLOWED) jobs.delete(jobs.keys().next().value);
  save();
  draw();
  poll();
}

/** Only the ids still worth asking for: one the server does not know would be asked for again after a reload. */
function save() {
  const ids = [...jobs.values()].filter((j) => j.status !== NOT_FOUND).map((j) => j.id);
  sessionStorage.setItem(IDS_ITEM, JSON.stringify(ids));
}

function active() {
  return [...jobs.values()].filter((j) => j.status !== NOT_FOUND && (j.stub || !TERMINAL.has(j.status)));
}

function markNotFound(id) {
  jobs.set(id, {
    id,
    status: NOT_FOUND,
    error: "The server has no job with this id: mistyped, or a finished job past its retention time.",
  });
  save();
}

/** The wait before the next round after `failed` failed rounds in a row: 0.5 s, then doubled each time. */
export function retryDelay(failed) {
  return Math.min(POLL_MS * 2 ** failed, MAX_RETRY_MS);
}

/** One round of polling; schedules the next one while any followed job is still running. One round at a time:
 * a call during a round asks for another one right after it. */
export async function poll() {
  if (polling) {
    pollAgain = true;
    return;
  }
  polling = true;
  clearTimeout(timer);
  timer = null;
  try {
    await pollRound();
  } finally {
    polling = false;
  }
  if (pollAgain) {
    pollAgain = false;
    poll();
  }
}

async function pollRound() {
  const error = byId("jobs-error");
  let needsKey = false;
  let failure = null;
  for (const job of active()) {
    try {
      const fresh = await api("GET", path("/jobs", job.id));
      const before = jobs.get(job.id);
      if (!before) continue; // dismissed meanwhile
      jobs.set(job.id, fresh);
      // Overlapping rounds (a job followed while one runs) must report an ending once.
      if (TERMINAL.has(fresh.status) && (before.stub || !TERMINAL.has(before.status))) finished(fresh);
    } catch (err) {
      if (err.status === 404) {
        if (jobs.has(job.id)) markNotFound(job.id);
        continue;
      }
      needsKey = err.status === 401;
      failure = err;
      if (needsKey) break;
    }
  }
  failedRounds = failure && !needsKey ? failedRounds + 1 : 0;
  const delay = retryDelay(failedRounds);
  byId("jobs").dataset.pollMs = String(delay);
  if (!failure) error.textContent = "";
  else if (needsKey) error.textContent = `Jobs: ${failure.message}`;
  else error.textContent = `Jobs: ${failure.message} (asking again in ${Math.round(delay / 1000)} s)`;
  draw();
  // Without a key every poll would fail the same way: polling starts again once a key is given.
  if (active().length && !needsKey && !pollAgain) timer = setTimeout(poll, delay);
}

async function cancel(id) {
  await act(() => api("DELETE", path("/jobs", id)), id);
}

async function retry(id) {
  await act(() => api("POST", `${path("/jobs", id)}/retry`), id);
}

async function act(call, id) {
  try {
    jobs.set(id, await call());
    byId("jobs-error").textContent = "";
  } catch (err) {
    if (err.status === 404) markNotFound(id);
    else byId("jobs-error").textContent = `Job ${id}: ${err.message}`;
  }
  draw();
  poll();
}

function dismiss(id) {
  jobs.delete(id);
  save();
  draw();
}

function draw() {
  jobRows(byId("jobs"), [...jobs.values()].reverse(), { cancel, retry, dismiss }); // newest first
}
