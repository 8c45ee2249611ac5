// The console's entry point: wires the forms to the API, asks for a key when the server wants one, and keeps the
// collections and the server status fresh.

import { api, apiKey, forgetApiKey, onUnauthorized, RawJson, setApiKey } from "./api.js";
import { refreshCollections } from "./collections.js";
import { byId, fmtNumber } from "./dom.js";
import { loadEvalFiles } from "./evals.js";
import { refreshJobList, wireJobList } from "./job_list.js";
import { followJob, onJobEnded, poll, restoreJobs } from "./jobs.js";
import { runSearch } from "./search.js";

const COLLECTIONS_EVERY_MS = 10000;
const STATUS_EVERY_MS = 5000;
// What a browser can put in an Authorization header (Latin-1), less spaces and control characters: any other key
// would make every request fail before it is sent.
const SENDABLE_KEY = /^[\x21-\x7e\xa1-\xff]+$/;

function askForKey(failure) {
  const dialog = byId("key-dialog");
  byId("key-error").textContent = apiKey() ? `The key was refused: ${failure.message}` : "";
  if (!dialog.open) dialog.showModal();
  byId("api-key").focus();
}

function showKeyState() {
  const key = apiKey();
  byId("key-status").textContent = key ? "API key set for this tab" : "";
  byId("forget-key").hidden = !key;
}

async function refreshStatus() {
  const pill = byId("server-status");
  try {
    const ready = await api("GET", "/readyz");
    const n = ready.collections;
    pill.textContent = `ready · ${fmtNumber(n)} collection${n === 1 ? "" : "s"}`;
    pill.className = "pill ok";
  } catch (err) {
    pill.textContent = err.status === 503 ? "starting…" : "unreachable";
    pill.className = "pill bad";
  }
}

function refreshAll() {
  showKeyState();
  refreshStatus();
  refreshCollections();
  refreshJobList();
  poll();
}

/** The metadata as typed, checked to be a JSON object, or undefined when empty. It is sent as the text typed (see
 * RawJson): JSON.parse would round integers past 2^53, turn 2005.0 into 2005 and 1e999 into null. */
function parseMetadata(text) {
  if (!text.trim()) return undefined;
  const value = JSON.parse(text);
  if (!value || typeof value !== "object" || Array.isArray(value)) throw new Error("metadata must be a JSON object");
  return text.trim();
}

async function submitIndex(event) {
  event.preventDefault();
  const result = byId("index-result");
  delete result.dataset.jobId;
  let metadata;
  try {
    metadata = parseMetadata(byId("index-metadata").value);
  } catch (err) {
    result.textContent = `Metadata: ${err.message}`;
    result.className = "error";
    return;
  }
  const doc = { id: byId("index-doc-id").value, text: byId("index-text").value };
  const title = byId("index-title").value;
  if (title) doc.title = title;
  const collection = byId("index-collection").value.trim();
  const docText = metadata ? `${JSON.stringify(doc).slice(0, -1)},"metadata":${metadata}}` : JSON.stringify(doc);
  try {
    const accepted = await api("POST", "/index", new RawJson(`{"collection":${JSON.stringify(collection)},"documents":[${docText}]}`));
    result.textContent = `Job ${accepted.job_id} ${accepted.status}`;
    result.dataset.jobId = accepted.job_id;
    result.className = "muted";
    followJob({ id: accepted.job_id, collection, kind: "upsert", status: accepted.status, done: 0, total: 1 });
    refreshJobList();
  } catch (err) {
    result.textContent = `Index: ${err.message}`;
    result.className = "error";
  }
}

function wire() {
  onUnauthorized(askForKey);
  onJobEnded((job) => {
    if (job.status === "succeeded") refreshCollections();
    refreshJobList();
  });
  wireJobList();
  byId("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = byId("api-key").value;
    if (!SENDABLE_KEY.test(key)) {
      byId("key-error").textContent =
        "This key cannot be sent: a key travels in a header, which holds Latin-1 characters without spaces or control characters.";
      return;
    }
    setApiKey(key);
    byId("api-key").value = "";
    byId("key-dialog").close();
    refreshAll();
  });
  byId("forget-key").addEventListener("click", () => {
    forgetApiKey();
    refreshAll();
  });
  byId("refresh-collections").addEventListener("click", () => refreshCollections());
  byId("index-form").addEventListener("submit", submitIndex);
  byId("follow-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = byId("follow-job-id").value.trim();
    if (id) followJob({ id });
    byId("follow-job-id").value = "";
  });
  byId("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runSearch();
  });
  // The browser stops a search whose fields are invalid (it shows why): the last search's error no longer applies.
  byId("search-form").addEventListener("invalid", () => (byId("search-error").textContent = ""), true);
  byId("eval-files").addEventListener("change", (event) => {
    loadEvalFiles([...event.target.files]);
    event.target.value = ""; // the same file can be loaded again after an edit
  });
}

wire();
showKeyState();
refreshStatus();
refreshCollections();
refreshJobList();
restoreJobs();
setInterval(refreshStatus, STATUS_EVERY_MS);
setInterval(() => {
  if (!byId("key-dialog").open) refreshCollections();
}, COLLECTIONS_EVERY_MS);
document.body.dataset.ready = "true";
