// Inline SVG line charts (no external assets: the CSP allows this origin only). The views decide what to plot;
// this module draws it. Numbers the browser test reads back are kept in data-* attributes.

import { fmt } from "./dom.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const W = 460, H = 230, M = { top: 26, right: 12, bottom: 30, left: 44 };

// The run modes with a colour of their own: each is the CSS class m-<mode> (dashboard.css), the mapping of the
// report's figures (genenv.experiments.figures.MODE_COLOURS); any other mode is m-other.
export const MODE_ORDER = ["genenv", "random_simulator", "static_augmentation", "agent_only", "generic_rwr"];
export const modeClass = (mode) => "m-" + (MODE_ORDER.includes(mode) ? mode : "other");

export function el(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// A tick step from 1, 2, 2.5, 5 × 10^k (no 2.5 for counts) giving at most 5 ticks up to v.
function tickStep(v, integer) {
  if (!(v > 0)) return integer ? 1 : 0.25;
  const raw = v / 4, unit = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of integer ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10]) {
    if (m * unit >= raw) return integer && m * unit < 1 ? 1 : m * unit;
  }
  return 10 * unit;
}

function tickLabel(v) {
  return String(Number(v.toPrecision(6)));
}

// The y axis of a unit: shares span [0, 1]; counts and scores get round ticks up to the largest value.
function yAxis(unit, values) {
  const top = Math.max(0, ...values);
  const step = unit === "share" ? 0.25 : tickStep(top, unit === "count");
  return { step, max: unit === "share" ? 1 : step * Math.max(1, Math.ceil(top / step - 1e-9)) };
}

// An epoch x axis over the epochs present (at least two wide), at most ~10 labels.
function epochAxis(indices) {
  const x0 = indices.length ? Math.min(...indices) : 0;
  const x1 = Math.max(indices.length ? Math.max(...indices) : 1, x0 + 1);
  return { min: x0, max: x1, step: Math.max(1, Math.ceil((x1 - x0 + 1) / 10)), label: "epoch" };
}

// A count x axis from 0 to a round number above the largest value.
function countAxis(values, label) {
  const top = Math.max(0, ...values);
  const step = tickStep(top, true);
  return { min: 0, max: step * Math.max(1, Math.ceil(top / step - 1e-9)), step, label };
}

// A chart without data: figure, caption, grid, ticks, the α ± k_min band when `band` is given, and the axes.
// Returns the figure, its svg and the data → pixel scales.
function frame(id, title, x, y, band) {
  const px = (v) => M.left + ((v - x.min) / (x.max - x.min)) * (W - M.left - M.right);
  const py = (v) => H - M.bottom - (v / y.max) * (H - M.top - M.bottom);
  const figure = document.createElement("figure");
  figure.className = "chart";
  figure.dataset.chart = id;
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  figure.append(caption, svg);

  const grid = el("g", { class: "grid" });
  const ticks = el("g");
  for (let i = 0; i * y.step <= y.max + 1e-9; i++) {
    const v = i * y.step;
    grid.append(el("line", { x1: M.left, x2: W - M.right, y1: py(v), y2: py(v) }));
    ticks.append(el("text", { class: "tick", x: M.left - 6, y: py(v) + 4, "text-anchor": "end" }, tickLabel(v)));
  }
  for (let v = x.min; v <= x.max + 1e-9; v += x.step) {
    ticks.append(el("text", { class: "tick", x: px(v), y: H - M.bottom + 16, "text-anchor": "middle" }, tickLabel(v)));
  }
  ticks.append(el("text", { class: "tick", x: W - M.right, y: H - 2, "text-anchor": "end" }, x.label));
  svg.append(grid);

  if (band) {
    const lo = Math.max(0, band.alpha - band.kMin), hi = Math.min(1, band.alpha + band.kMin);
    svg.append(el("rect", { class: "band", "data-lo": lo, "data-hi": hi,
      x: M.left, width: W - M.left - M.right, y: py(hi), height: py(lo) - py(hi) }));
    svg.append(el("line", { class: "alpha", x1: M.left, x2: W - M.right, y1: py(band.alpha), y2: py(band.alpha) }));
  }
  svg.append(el("path", { class: "axis", d: `M${M.left},${M.top}V${H - M.bottom}H${W - M.right}` }));
  svg.append(ticks);
  return { figure, svg, px, py };
}

function pathOf(pts, px, py) {
  return pts.map(([x, y], j) => `${j ? "L" : "M"}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join("");
}

function emptyNote(svg, text) {
  svg.append(el("text", { class: "empty", x: W / 2, y: H / 2, "text-anchor": "middle" }, text));
}

export function swatch(cls) {
  const svg = el("svg", { class: "swatch " + cls, viewBox: "0 0 14 14", width: 14, height: 14, "aria-hidden": "true" });
  svg.append(el("rect", { x: 1, y: 1, width: 12, height: 12 }));
  return svg;
}

// A run chart: one coloured line per series over the epochs, `series` as [label, [[epoch, value], ...]].
export function epochChart({ id, title, unit, band, series, epochs, empty }) {
  const values = series.flatMap(([, pts]) => pts.map((p) => p[1]));
  const { figure, svg, px, py } = frame(id, title, epochAxis(epochs), yAxis(unit, values), band);
  series.forEach(([label, pts], i) => {
    const cls = "s" + (i % 6);
    if (pts.length) {
      svg.append(el("path", { class: "series " + cls, d: pathOf(pts, px, py), "data-series": label,
        "data-points": pts.length }));
      for (const [x, y] of pts) {
        const dot = el("circle", { class: cls, cx: px(x), cy: py(y), r: 3 });
        dot.append(el("title", {}, `${label} · epoch ${x}: ${fmt(y)}`));
        svg.append(dot);
      }
    }
    const lx = M.left + 8 + i * 120;
    svg.append(el("rect", { class: cls, x: lx, y: 8, width: 10, height: 10 }));
    svg.append(el("text", { class: "legend", x: lx + 14, y: 17 }, label));
  });
  if (!values.length) emptyNote(svg, empty);
  return figure;
}

// An experiment chart: per mode (its colour) every replicate faint and the mean over replicates thick.
// `curves`: [{mode, replicates: [{member, pts: [[x, y, epoch]]}], means: [{epoch, x, y, n}]}]; `xLabel` set means
// x is a count (else the epoch); `target` a horizontal reference line in static_augmentation's colour.
export function modeChart({ id, title, unit, band, curves, epochs, xLabel, target }) {
  const pts = curves.flatMap((c) => c.replicates.flatMap((r) => r.pts));
  const x = xLabel ? countAxis(pts.map((p) => p[0]), xLabel) : epochAxis(epochs);
  const { figure, svg, px, py } = frame(id, title, x, yAxis(unit, pts.map((p) => p[1])), band);

  if (target !== null && target !== undefined) {
    const line = el("line", { class: "target " + modeClass("static_augmentation"), "data-value": target,
      x1: M.left, x2: W - M.right, y1: py(target), y2: py(target) });
    line.append(el("title", {}, `static_augmentation final held-out accuracy: ${fmt(target)}`));
    svg.append(line);
  }
  const at = (pt) => (xLabel ? `epoch ${pt.epoch}, ${fmt(pt.x)} tasks` : `epoch ${pt.epoch}`);
  for (const { mode, replicates, means } of curves) {
    const g = el("g", { class: "mode " + modeClass(mode), "data-mode": mode });
    for (const { member, pts: rp } of replicates) {
      if (!rp.length) continue;
      g.append(el("path", { class: "replicate", d: pathOf(rp, px, py), "data-replicate": member.replicate,
        "data-points": rp.length }));
      for (const [vx, vy, epoch] of rp) {
        const dot = el("circle", { class: "replicate", cx: px(vx), cy: py(vy), r: 2,
          "data-replicate": member.replicate, "data-epoch": epoch, "data-y": vy });
        dot.append(el("title", {}, `${mode} replicate ${member.replicate} · ${at({ epoch, x: vx })}: ${fmt(vy)}`));
        g.append(dot);
      }
    }
    if (means.length) {
      g.append(el("path", { class: "mean", d: pathOf(means.map((m) => [m.x, m.y]), px, py), "data-mode": mode,
        "data-points": means.length }));
      for (const m of means) {
        const dot = el("circle", { class: "mean", cx: px(m.x), cy: py(m.y), r: 3.5, "data-mode": mode,
          "data-epoch": m.epoch, "data-x": m.x, "data-y": m.y, "data-n": m.n });
        dot.append(el("title", {}, `${mode} mean of ${m.n} · ${at(m)}: ${fmt(m.y)}`));
        g.append(dot);
      }
    }
    svg.append(g);
  }
  if (!pts.length) emptyNote(svg, "no data yet");
  return figure;
}
