// Eval results as bar charts, drawn as inline SVG (no chart library, no build step).
//
// No API route serves eval results, so the charts come from the JSON files `vela eval --json FILE` writes, read in
// the browser: {"dataset", "dim", "embedder", "metrics": {mode: {metric: value}}, "baseline"?: ...}. A
// "baseline" is either the same modes without a rerank stage ({mode: {metric}}) or other models
// ({name: {"metrics": ..., "embedder"}}); each model gets its own chart.

import { byId, el, modelName, show } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const COLOURS = ["#2563eb", "#f59e0b", "#10b981", "#8b5cf6", "#ef4444", "#64748b"];

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  for (const child of children) {
    if (child !== undefined && child !== null) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function isMetrics(value) {
  // At least one mode, each with at least one finite value (an empty `metrics` would draw an empty chart).
  return (
    value &&
    typeof value === "object" &&
    Object.keys(value).length > 0 &&
    Object.values(value).every(
      (m) => m && typeof m === "object" && Object.keys(m).length > 0 && Object.values(m).every(Number.isFinite),
    )
  );
}

/** The models of one eval file: [{title, series: [{name, values: {metric: value}}]}]. */
export function modelsOf(result, fileName) {
  if (!result || !isMetrics(result.metrics)) {
    throw new Error(`${fileName}: not a vela eval result (no "metrics": {mode: {metric: value}})`);
  }
  const where = [result.dataset, result.dim ? `dim ${result.dim}` : null].filter(Boolean).join(" · ");
  const series = Object.entries(result.metrics).map(([mode, values]) => ({ name: mode, values }));
  const models = [{ title: `${modelName(result.embedder)} — ${where}`, file: fileName, series }];
  const baseline = result.baseline;
  if (baseline && isMetrics(baseline)) {
    for (const [mode, values] of Object.entries(baseline)) series.push({ name: `${mode} (baseline)`, values });
  } else if (baseline && typeof baseline === "object") {
    for (const [name, other] of Object.entries(baseline)) {
      if (!other || !isMetrics(other.metrics)) continue;
      models.push({
        title: `${name}: ${modelName(other.embedder)} — ${where}`,
        file: `${fileName} (baseline)`,
        series: Object.entries(other.metrics).map(([mode, values]) => ({ name: mode, values })),
      });
    }
  }
  return models;
}

/** A grouped bar chart: one group per metric, one bar per series. The axis runs from 0 to 1 (NDCG, recall and MRR
 * lie there), or up to the largest value where one is larger; a negative value is drawn as 0 and shown as it is. */
export function barChart(model) {
  const metrics = [...new Set(model.series.flatMap((s) => Object.keys(s.values)))];
  const width = 460;
  const height = 210;
  const pad = { left: 34, right: 8, top: 14, bottom: 28 };
  const plotH = height - pad.top - pad.bottom;
  const groupW = (width - pad.left - pad.right) / Math.max(metrics.length, 1);
  const barW = Math.min(36, (groupW - 16) / Math.max(model.series.length, 1));
  const top = Math.max(1, ...model.series.flatMap((s) => Object.values(s.values)));
  const y = (v) => pad.top + plotH * (1 - Math.max(0, Math.min(top, v)) / top);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    class: "bar-chart",
    "aria-label": `${model.title}: ${metrics.join(", ")}`,
  });
  for (const tick of [0, 0.25, 0.5, 0.75, 1].map((t) => t * top)) {
    chart.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: y(tick), y2: y(tick), class: "grid" }));
    const label = Number.isInteger(tick) || top === 1 ? tick : tick.toPrecision(3);
    chart.append(svg("text", { x: pad.left - 4, y: y(tick) + 3, class: "tick", "text-anchor": "end" }, label));
  }
  metrics.forEach((metric, g) => {
    const x0 = pad.left + g * groupW + (groupW - barW * model.series.length) / 2;
    model.series.forEach((s, i) => {
      const value = s.values[metric];
      if (!Number.isFinite(value)) return;
      const x = x0 + i * barW;
      const bar = svg("rect", {
        x: x + 1,
        y: y(value),
        width: barW - 2,
        height: y(0) - y(value),
        fill: COLOURS[i % COLOURS.length],
        class: "bar",
        "data-series": s.name,
        "data-metric": metric,
      });
      bar.append(svg("title", {}, `${s.name} ${metric}: ${value}`));
      chart.append(bar);
      chart.append(svg("text", { x: x + barW / 2, y: y(value) - 3, class: "value", "text-anchor": "middle" }, value.toFixed(3)));
    });
    chart.append(
      svg("text", { x: pad.left + (g + 0.5) * groupW, y: height - 10, class: "label", "text-anchor": "middle" }, metric),
    );
  });
  return chart;
}

function legend(model) {
  return el(
    "div",
    { class: "legend" },
    model.series.map((s, i) =>
      el("span", {}, el("i", { class: "swatch", "data-colour": i % COLOURS.length }), s.name),
    ),
  );
}

function colourSwatches(root) {
  // CSP allows no inline style attributes; the CSSOM is allowed, so swatch colours are set here.
  for (const swatch of root.querySelectorAll(".swatch")) {
    swatch.style.background = COLOURS[Number(swatch.dataset.colour)];
  }
}

const loaded = [];

export async function loadEvalFiles(files) {
  const error = byId("evals-error");
  const problems = [];
  for (const file of files) {
    try {
      loaded.push(...modelsOf(JSON.parse(await file.text()), file.name));
    } catch (err) {
      problems.push(err instanceof SyntaxError ? `${file.name}: not JSON (${err.message})` : err.message);
    }
  }
  error.textContent = problems.join("; ");
  const target = byId("evals");
  show(
    target,
    loaded.map((model) =>
      el("figure", { class: "chart" }, barChart(model), legend(model), el("figcaption", {}, model.title, el("small", {}, model.file))),
    ),
  );
  colourSwatches(target);
}
