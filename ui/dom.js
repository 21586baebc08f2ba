// dom.js - building the page.  Every string from the API becomes a text node (textContent):
// never HTML.  Attributes are set one by one with setAttribute, and only hash links are made.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = String(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** Replaces el's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** An in-app link: #/what/id, the id percent-encoded. */
export function link(text, ...parts) {
  return h("a", { href: "#/" + parts.map(encodeURIComponent).join("/") }, text);
}

export function table(caption, heads, rows) {
  return h(
    "table",
    {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, heads.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows),
  );
}

export function errorText(e) {
  return e && e.status ? `${e.status} ${e.code}: ${e.message}` : String(e && e.message ? e.message : e);
}

export function errorBox(e) {
  return h("p", { class: "error", role: "alert" }, errorText(e));
}

/** A labelled field: <label>text <control></label> with an id so tests and readers find it. */
export function field(label, control) {
  const id = control.id || "f-" + Math.random().toString(36).slice(2, 9);
  control.id = id;
  return h("span", { class: "field" }, h("label", { for: id }, label), control);
}

export function select(options, value) {
  return h(
    "select",
    {},
    options.map(([v, t]) => h("option", { value: v, selected: v === value ? true : null }, t)),
  );
}

// ---- formatting ------------------------------------------------------------------------
export function ago(iso, now = Date.now()) {
  if (!iso) return "";
  return dur(now - Date.parse(iso));
}

export function until(iso, now = Date.now()) {
  if (!iso) return "";
  const ms = Date.parse(iso) - now;
  return ms <= 0 ? "now" : "in " + dur(ms);
}

export function dur(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}

export function usd(micro) {
  if (micro === null || micro === undefined) return "";
  const neg = micro < 0;
  const a = Math.abs(micro);
  return (neg ? "-$" : "$") + Math.floor(a / 1e6) + "." + String(a % 1e6).padStart(6, "0");
}

export function bytes(n) {
  if (n === null || n === undefined) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

export function time(iso) {
  return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
}
