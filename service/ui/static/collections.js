// The collections table (GET /collections): counts, embedder, segments and manifest version, and the settings.

import { api } from "./api.js";
import { byId, el, fmtBytes, fmtNumber, fmtTime, modelName, show } from "./dom.js";

let drawnJson = null; // what the table shows: redrawn only when it changed (an open "settings" stays open)

/** Loads the collections, draws the table and fills the collection pickers; resolves to the list. */
export async function refreshCollections() {
  const error = byId("collections-error");
  try {
    const { collections } = await api("GET", "/collections");
    error.textContent = "";
    const names = collections.map((c) => c.name);
    const json = JSON.stringify(collections);
    if (json !== drawnJson) {
      drawTable(collections);
      fillPickers(names);
    }
    drawnJson = json;
    return collections;
  } catch (err) {
    error.textContent = `Collections: ${err.message}`;
    if (err.status === 401) {
      show(byId("collections"));
      drawnJson = null;
    }
    return [];
  }
}

function drawTable(collections) {
  const target = byId("collections");
  if (!collections.length) {
    show(target, el("p", { class: "note", id: "no-collections" }, "No collections yet: index a document below."));
    return;
  }
  const head = el(
    "tr",
    {},
    ["Name", "Docs", "Passages", "Embedder", "Dims", "Segments", "Version", "Index", "Settings"].map((h) =>
      el("th", {}, h),
    ),
  );
  const rows = collections.map((c) => {
    const index = c.index || {};
    const dense = index.dense || {};
    const kind = Array.isArray(dense.kind) ? dense.kind.join("+") : dense.kind || "–";
    return el(
      "tr",
      { "data-collection": c.name },
      el("td", { class: "name" }, c.name, c.shards > 1 ? el("span", { class: "tag" }, `${c.shards} shards`) : null),
      el("td", { class: "num docs" }, fmtNumber(c.documents)),
      el("td", { class: "num passages" }, fmtNumber(c.passages)),
      el("td", { class: "embedder", title: c.embedder }, modelName(c.embedder)),
      el("td", { class: "num" }, `${c.dims.full} / ${c.dims.small}`),
      el(
        "td",
        { class: "num segments", title: `${fmtNumber(index.deleted_rows)} deleted rows` },
        fmtNumber(index.segments),
      ),
      el("td", { class: "num version" }, fmtNumber(index.version)),
      el("td", {}, `${kind} · ${fmtBytes(index.bytes)}`),
      el("td", {}, settingsDetails(c)),
    );
  });
  show(target, el("table", { id: "collections-table" }, el("thead", {}, head), el("tbody", {}, rows)));
}

function settingsDetails(c) {
  const index = c.index || {};
  const settings = {
    created: fmtTime(c.created_at),
    embedder: c.embedder,
    dims: c.dims,
    chunking: c.chunking,
    bm25: index.bm25,
    dense: index.dense,
    passages_indexed: index.passages,
    deleted_rows: index.deleted_rows,
    shards: c.shards,
  };
  if (index.shards) settings.shard_counts = index.shards;
  return el("details", {}, el("summary", {}, "show"), el("pre", {}, JSON.stringify(settings, null, 2)));
}

function fillPickers(list) {
  show(
    byId("collection-names"),
    list.map((n) => el("option", { value: n })),
  );
  const select = byId("search-collection");
  const chosen = select.value;
  show(
    select,
    list.length ? null : el("option", { value: "" }, "(no collections)"),
    list.map((n) => el("option", { value: n }, n)),
  );
  if (list.includes(chosen)) select.value = chosen;
}
