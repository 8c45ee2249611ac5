// The search playground (POST /search): every hit with its rank in each list, the fused score, the passage and its
// offsets, and the query's words highlighted in the passage.
//
// The API returns no matched terms, so the highlighting is the console's own: query words, English stopwords
// dropped, matched on a rough stem (BM25 uses a Snowball stemmer; the two can differ on some words).

import { api, RawJson } from "./api.js";
import { byId, el, fmtNumber, show } from "./dom.js";

const STOPWORDS = new Set(
  "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with what which who how why when where does do".split(
    " ",
  ),
);
const WORD = /[\p{L}\p{N}]+/gu;
const SUFFIXES = ["ational", "ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s"];

/** A rough English stem: enough to match "tides" with "tide" or "caused" with "causes". */
export function stem(word) {
  const w = word.toLowerCase();
  for (const suffix of SUFFIXES) {
    if (w.endsWith(suffix) && w.length - suffix.length >= 3) {
      const base = w.slice(0, -suffix.length);
      return suffix === "ies" || suffix === "ied" ? `${base}y` : base;
    }
  }
  return w;
}

export function queryStems(query) {
  const words = (query.match(WORD) || []).filter((w) => w.length >= 2 && !STOPWORDS.has(w.toLowerCase()));
  return new Set(words.map(stem));
}

/** The text as text nodes, with each word whose stem is a query stem in a <mark>. */
export function highlighted(text, stems) {
  const out = [];
  let last = 0;
  for (const match of text.matchAll(WORD)) {
    if (!stems.has(stem(match[0]))) continue;
    out.push(text.slice(last, match.index), el("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  out.push(text.slice(last));
  return out;
}

function request() {
  const body = {
    collection: byId("search-collection").value,
    query: byId("search-query").value,
    mode: byId("search-mode").value,
    k: Number(byId("search-k").value),
    group_by_doc: byId("search-group").checked,
  };
  // The dense index's dims only where a dense list is searched: the API refuses dim in bm25 mode (it changes nothing)
  if (body.mode !== "bm25") body.dim = byId("search-dim").value;
  const groupBy = byId("search-group-by").value.trim();
  if (groupBy) body.group_by = { key: groupBy }; // one hit per value of that metadata field
  if (byId("search-rerank").checked) {
    body.rerank = { top_n: Number(byId("search-rerank-top-n").value) || 50 };
    const model = byId("search-rerank-model").value.trim();
    if (model) body.rerank.model = model;
  }
  return body;
}

/** The body as JSON text, with the filter as typed (checked to be JSON: a SyntaxError is the caller's to show). */
function requestText(body) {
  const filter = byId("search-filter").value.trim();
  if (!filter) return new RawJson(JSON.stringify(body));
  JSON.parse(filter);
  return new RawJson(`${JSON.stringify(body).slice(0, -1)},"filter":${filter}}`);
}

export async function runSearch() {
  const error = byId("search-error");
  const results = byId("search-results");
  error.textContent = "";
  const body = request();
  let text;
  try {
    text = requestText(body);
  } catch (err) {
    show(results); // no answer on screen that this request did not give
    error.textContent = `Filter: not JSON (${err.message})`;
    return;
  }
  if (!body.collection) {
    error.textContent = "Choose a collection (index a document first if there is none).";
    return;
  }
  show(results, el("p", { class: "note" }, "Searching…"));
  try {
    const response = await api("POST", "/search", text);
    drawResults(body, response);
  } catch (err) {
    show(results);
    error.textContent = `Search: ${err.message}`;
  }
}

function drawResults(body, response) {
  const stems = queryStems(body.query);
  const summary = el(
    "p",
    { class: "summary", id: "search-summary" },
    `${response.hits.length} hit${response.hits.length === 1 ? "" : "s"} in ${fmtNumber(response.took_ms, 1)} ms · `,
    `${body.mode}${body.dim ? ` · dim ${body.dim}` : ""} · k ${body.k}`,
    response.rerank ? rerankSummary(response.rerank) : null,
  );
  const hits = response.hits.map((hit, i) => hitCard(hit, i + 1, body.mode, stems));
  show(
    byId("search-results"),
    summary,
    hits.length ? hits : el("p", { class: "note" }, "No hits."),
  );
}

function rerankSummary(r) {
  const why = r.error ? `: ${r.error}` : "";
  return el(
    "span",
    { class: `rerank-info ${r.status}` },
    ` · rerank ${r.status} (${r.scored} pairs, ${fmtNumber(r.took_ms, 1)} ms, weight ${r.weight})${why}`,
  );
}

// Hybrid scores are the collection's own fusion (RRF, a convex combination or one list: GET /collections/{name}).
const SCORE_LABEL = { hybrid: "fused score", dense: "dense score", bm25: "BM25 score" };

function hitCard(hit, rank, mode, stems) {
  const p = hit.passage;
  const meta = hit.metadata && Object.keys(hit.metadata).length ? JSON.stringify(hit.metadata) : null;
  return el(
    "article",
    { class: "hit", "data-hit-id": hit.id },
    el(
      "header",
      {},
      el("span", { class: "rank" }, `#${rank}`),
      el("code", { class: "hit-id" }, hit.id),
      hit.title ? el("strong", { class: "hit-title" }, hit.title) : null,
    ),
    el(
      "div",
      { class: "hit-scores" },
      el("span", { class: "score", title: SCORE_LABEL[mode] }, `${SCORE_LABEL[mode]} ${fmtNumber(hit.score, 4)}`),
      el("span", { class: "list-rank dense" }, `dense rank ${hit.ranks.dense ?? "–"}`),
      el("span", { class: "list-rank bm25" }, `BM25 rank ${hit.ranks.bm25 ?? "–"}`),
      hit.rerank_score !== null && hit.rerank_score !== undefined
        ? el("span", { class: "rerank-score" }, `rerank ${fmtNumber(hit.rerank_score, 4)}`)
        : null,
      el(
        "span",
        { class: "offsets", title: `passage id ${p.id}` },
        `passage ${p.index} · chars ${p.start}–${p.end}`,
      ),
    ),
    el("p", { class: "hit-text" }, highlighted(hit.text, stems)),
    meta ? el("p", { class: "hit-meta" }, el("code", {}, meta)) : null,
  );
}
