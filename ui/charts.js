// charts.js - small charts as inline SVG built node by node (no library, no inline style: the
// CSP forbids it; colours come from style.css classes).
import { h, s } from "./dom.js";

const W = 320, H = 120, PAD = 4;

/** A line chart: series [{name, cls, values: [number|null]}], optional limit {value, label};
 * fmt formats a value for the caption and the axis. */
export function lineChart(title, series, { limit = null, fmt = String } = {}) {
  const all = series.flatMap((x) => x.values).filter((v) => v !== null && v !== undefined);
  let max = Math.max(1e-9, ...all, limit ? limit.value : 0);
  max *= 1.05;
  const n = Math.max(2, ...series.map((x) => x.values.length));
  const x = (i) => PAD + (i * (W - 2 * PAD)) / (n - 1);
  const y = (v) => H - PAD - (v / max) * (H - 2 * PAD);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title, class: "chart" });
  svg.append(s("title", {}, title));
  svg.append(s("line", { x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD, class: "axis" }));
  if (limit) {
    svg.append(s("line", { x1: PAD, y1: y(limit.value), x2: W - PAD, y2: y(limit.value), class: "limit" }));
    svg.append(s("text", { x: W - PAD, y: y(limit.value) - 3, class: "limit-label", "text-anchor": "end" }, limit.label));
  }
  svg.append(s("text", { x: PAD + 2, y: 12, class: "axis-label" }, fmt(max)));
  for (const ser of series) {
    const pts = ser.values
      .map((v, i) => (v === null || v === undefined ? null : `${x(i).toFixed(1)},${y(v).toFixed(1)}`))
      .filter(Boolean);
    if (pts.length) svg.append(s("polyline", { points: pts.join(" "), class: "series " + ser.cls }));
  }
  const legend = series.map((ser) => {
    const last = [...ser.values].reverse().find((v) => v !== null && v !== undefined);
    return h("span", { class: "legend " + ser.cls }, `${ser.name}: ${last === undefined ? "–" : fmt(last)}`);
  });
  return h("figure", { class: "chart-box" }, svg, h("figcaption", {}, h("strong", {}, title), " ", legend));
}

/** A bar chart of labelled values (spend per day). */
export function barChart(title, bars, { fmt = String } = {}) {
  const max = Math.max(1e-9, ...bars.map((b) => b.value)) * 1.05;
  const bw = (W - 2 * PAD) / Math.max(1, bars.length);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H + 14}`, role: "img", "aria-label": title, class: "chart" });
  svg.append(s("title", {}, title));
  bars.forEach((b, i) => {
    const hgt = (b.value / max) * (H - 2 * PAD);
    const r = s("rect", { x: PAD + i * bw + 1, y: H - PAD - hgt, width: Math.max(1, bw - 2), height: hgt, class: "bar" });
    r.append(s("title", {}, `${b.label}: ${fmt(b.value)}`));
    svg.append(r);
  });
  svg.append(s("line", { x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD, class: "axis" }));
  if (bars.length) {
    svg.append(s("text", { x: PAD, y: H + 10, class: "axis-label" }, bars[0].label));
    svg.append(s("text", { x: W - PAD, y: H + 10, class: "axis-label", "text-anchor": "end" }, bars[bars.length - 1].label));
  }
  svg.append(s("text", { x: PAD + 2, y: 12, class: "axis-label" }, fmt(max)));
  return h("figure", { class: "chart-box wide" }, svg, h("figcaption", {}, h("strong", {}, title)));
}
