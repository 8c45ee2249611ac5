// Jobs the console follows: polled at GET /jobs/{id} while they run, cancelled with DELETE, retried with POST.
//
// The API has no route that lists jobs, so the console follows the jobs it started and those given by id. Their ids
// (not the key) are kept in sessionStorage, so that a reload keeps following them.

import { api, path } from "./api.js";
import { byId, el, fmtNumber, fmtSeconds, show } from "./dom.js";

const IDS_ITEM = "vela.jobs";
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const POLL_MS = 500;
const MAX_FOLLOWED = 20;

const jobs = new Map(); // id -> the last JobOut seen (or a stub while the first GET is under way)
let timer = null;
let polling = false;
let pollAgain = false;
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

function save() {
  sessionStorage.setItem(IDS_ITEM, JSON.stringify([...jobs.keys()]));
}

function active() {
  return [...jobs.values()].filter((j) => j.stub || !TERMINAL.has(j.status));
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
  for (const job of active()) {
    try {
      const fresh = await api("GET", path("/jobs", job.id));
      const before = jobs.get(job.id);
      if (!before) continue; // dismissed meanwhile
      jobs.set(job.id, fresh);
      error.textContent = "";
      // Overlapping rounds (a job followed while one runs) must report an ending once.
      if (TERMINAL.has(fresh.status) && (before.stub || !TERMINAL.has(before.status))) finished(fresh);
    } catch (err) {
      if (err.status === 404) jobs.set(job.id, { ...job, stub: false, status: "unknown", error: err.message });
      else error.textContent = `Jobs: ${err.message}`;
      needsKey = err.status === 401;
      if (needsKey) break;
    }
  }
  draw();
  // Without a key every poll would fail the same way: polling starts again once a key is given.
  if (active().length && !needsKey && !pollAgain) timer = setTimeout(poll, POLL_MS);
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
    byId("jobs-error").textContent = `Job ${id}: ${err.message}`;
  }
  draw();
  poll();
}

function dismiss(id) {
  jobs.delete(id);
  save();
  draw();
}

const drawn = new Map(); // id -> {json, node}: a row is drawn again only when its job changed

function draw() {
  const list = [...jobs.values()].reverse(); // newest first
  for (const id of drawn.keys()) if (!jobs.has(id)) drawn.delete(id);
  if (!list.length) {
    show(byId("jobs"), el("p", { class: "note" }, "No jobs followed yet."));
    return;
  }
  const rows = list.map((job) => {
    const json = JSON.stringify(job);
    const last = drawn.get(job.id);
    if (last && last.json === json) return last.node; // kept as is: no flicker, and focus or hover stay
    const node = jobRow(job);
    drawn.set(job.id, { json, node });
    return node;
  });
  show(byId("jobs"), rows);
}

function jobRow(job) {
  const ended = TERMINAL.has(job.status) || job.status === "unknown";
  const total = job.total || 0;
  const done = job.done || 0;
  const fraction = total ? done / total : job.status === "succeeded" ? 1 : 0;
  return el(
    "div",
    { class: `job ${job.status}`, "data-job-id": job.id, "data-status": job.status },
    el(
      "div",
      { class: "job-head" },
      el("span", { class: `badge ${job.status}` }, job.status),
      el("code", { class: "job-id", title: job.id }, job.id),
      el("span", { class: "muted" }, job.kind ? `${job.kind} · ${job.collection}` : ""),
      el("span", { class: "spacer" }),
      ended
        ? null
        : el("button", { type: "button", class: "cancel", onclick: () => cancel(job.id) }, "Cancel"),
      job.status === "failed"
        ? el("button", { type: "button", class: "retry", onclick: () => retry(job.id) }, "Retry")
        : null,
      ended ? el("button", { type: "button", class: "dismiss", onclick: () => dismiss(job.id) }, "Dismiss") : null,
    ),
    el("progress", { max: 1, value: fraction, "aria-label": `progress of job ${job.id}` }),
    el(
      "div",
      { class: "job-stats" },
      el("span", {}, `${fmtNumber(done)} / ${fmtNumber(total)} docs`),
      el("span", {}, `${fmtNumber(job.docs_per_s, 1)} docs/s`),
      el("span", {}, `ETA ${ended ? "–" : fmtSeconds(job.eta_s)}`),
      job.attempts > 1 ? el("span", {}, `${job.attempts} attempts`) : null,
      job.worker ? el("span", {}, `worker ${job.worker}`) : null,
    ),
    job.error ? el("p", { class: "error" }, job.error) : null,
  );
}
