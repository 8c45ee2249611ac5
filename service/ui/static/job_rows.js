// The rows of the followed jobs: status, progress, speed and ETA, with the buttons that act on each job.

import { el, fmtNumber, fmtSeconds, show } from "./dom.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const LABELS = { not_found: "not found" };
const drawn = new Map(); // id -> {json, node}: a row is drawn again only when its job changed

/** Draws `list` (JobOut, stubs or not-found entries) into `target`; `actions` has cancel, retry and dismiss. */
export function jobRows(target, list, actions) {
  const ids = new Set(list.map((job) => job.id));
  for (const id of drawn.keys()) if (!ids.has(id)) drawn.delete(id);
  if (!list.length) {
    show(target, el("p", { class: "note" }, "No jobs followed yet."));
    return;
  }
  const rows = list.map((job) => {
    const json = JSON.stringify(job);
    const last = drawn.get(job.id);
    if (last && last.json === json) return last.node; // kept as is: no flicker, and focus or hover stay
    const node = jobRow(job, actions);
    drawn.set(job.id, { json, node });
    return node;
  });
  show(target, rows);
}

export function statusLabel(status) {
  return LABELS[status] || status;
}

function jobRow(job, { cancel, retry, dismiss }) {
  const known = job.status !== "not_found";
  const ended = TERMINAL.has(job.status) || !known;
  const total = job.total || 0;
  const done = job.done || 0;
  const fraction = total ? done / total : job.status === "succeeded" ? 1 : 0;
  return el(
    "div",
    { class: `job ${job.status}`, "data-job-id": job.id, "data-status": job.status },
    el(
      "div",
      { class: "job-head" },
      el("span", { class: `badge ${job.status}` }, statusLabel(job.status)),
      el("code", { class: "job-id", title: job.id }, job.id),
      el("span", { class: "muted" }, job.kind ? `${job.kind} · ${job.collection}` : ""),
      el("span", { class: "spacer" }),
      ended ? null : el("button", { type: "button", class: "cancel", onclick: () => cancel(job.id) }, "Cancel"),
      job.status === "failed"
        ? el("button", { type: "button", class: "retry", onclick: () => retry(job.id) }, "Retry")
        : null,
      ended ? el("button", { type: "button", class: "dismiss", onclick: () => dismiss(job.id) }, "Dismiss") : null,
    ),
    known ? el("progress", { max: 1, value: fraction, "aria-label": `progress of job ${job.id}` }) : null,
    known
      ? el(
          "div",
          { class: "job-stats" },
          el("span", {}, `${fmtNumber(done)} / ${fmtNumber(total)} docs`),
          el("span", {}, `${fmtNumber(job.docs_per_s, 1)} docs/s`),
          el("span", {}, `ETA ${ended ? "–" : fmtSeconds(job.eta_s)}`),
          job.attempts > 1 ? el("span", {}, `${job.attempts} attempts`) : null,
          job.worker ? el("span", {}, `worker ${job.worker}`) : null,
        )
      : null,
    job.error ? el("p", { class: "error" }, job.error) : null,
  );
}
