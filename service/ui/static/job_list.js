// Recent jobs (GET /jobs): newest first, a page at a time, optionally of one collection or in one state. The list is
// what the server held when it was loaded; "Follow" on a row follows that job live (jobs.js).

import { api } from "./api.js";
import { byId, el, fmtNumber, fmtTime, show } from "./dom.js";
import { statusLabel } from "./job_rows.js";
import { followJob } from "./jobs.js";

const PAGE_SIZE = 20;

let listed = []; // the JobOut of every page loaded since the last refresh
let cursor = null; // next_cursor of the last page: null when there is no more
let generation = 0; // bumped by a refresh: the answer of an older request is dropped

/** Loads the first page again (after a filter changed, a job was started or one ended). */
export function refreshJobList() {
  generation += 1;
  return load(null, generation);
}

export function wireJobList() {
  byId("job-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    refreshJobList();
  });
  byId("job-filter-status").addEventListener("change", () => refreshJobList());
  byId("job-filter-collection").addEventListener("change", () => refreshJobList());
  byId("more-jobs").addEventListener("click", () => load(cursor, generation));
}

/** The query of GET /jobs: the filters as chosen; a status option may stand for several ("queued,running"). */
function query(after) {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
  const collection = byId("job-filter-collection").value.trim();
  if (collection) params.set("collection", collection);
  for (const status of byId("job-filter-status").value.split(",").filter(Boolean)) params.append("status", status);
  if (after) params.set("cursor", after);
  return `/jobs?${params}`;
}

async function load(after, asked) {
  const more = byId("more-jobs");
  const error = byId("job-list-error");
  more.disabled = true;
  try {
    const page = await api("GET", query(after));
    if (asked !== generation) return;
    listed = after ? [...listed, ...page.jobs] : page.jobs;
    cursor = page.next_cursor;
    error.textContent = "";
    draw();
  } catch (err) {
    if (asked !== generation) return;
    error.textContent = `Recent jobs: ${err.message}`;
    if (err.status === 401) {
      listed = [];
      cursor = null;
      draw();
    }
  } finally {
    if (asked === generation) more.disabled = false;
  }
}

function draw() {
  const more = byId("more-jobs");
  more.hidden = !cursor;
  const target = byId("job-list");
  if (!listed.length) {
    const filtered = byId("job-filter-collection").value.trim() || byId("job-filter-status").value;
    show(target, el("p", { class: "note", id: "no-jobs" }, filtered ? "No jobs match." : "No jobs yet."));
    return;
  }
  const head = el("tr", {}, ["Status", "Job", "Kind · collection", "Docs", "Created", ""].map((h) => el("th", {}, h)));
  const rows = listed.map((job) =>
    el(
      "tr",
      { class: "listed-job", "data-job-id": job.id, "data-status": job.status },
      el("td", {}, el("span", { class: `badge ${job.status}` }, statusLabel(job.status))),
      el("td", {}, el("code", { class: "job-id", title: job.id }, job.id)),
      el("td", {}, `${job.kind} · ${job.collection}`),
      el("td", { class: "num" }, `${fmtNumber(job.done)} / ${fmtNumber(job.total)}`),
      el("td", { class: "num" }, fmtTime(job.created_at)),
      el("td", {}, el("button", { type: "button", class: "follow", onclick: () => followJob(job) }, "Follow")),
    ),
  );
  show(target, el("table", { id: "job-list-table" }, el("thead", {}, head), el("tbody", {}, rows)));
}
