// Small DOM helpers shared by the views. Data only ever reaches the page through textContent or attributes
// (never innerHTML): run names, task payloads and agent replies are untrusted text.

export const $ = (id) => document.getElementById(id);

// An HTML element with attributes, properties given as `attrs` (className, dataset keys via data-*) and text.
export function h(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) node.setAttribute(k, String(v));
  }
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function fmt(v) {
  if (v === null || v === undefined) return "—";
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(3);
}

// A table's header row from column names.
export function headRow(table, names) {
  const head = table.createTHead().insertRow();
  for (const name of names) head.append(h("th", {}, name));
}

export function setStatus(text, isError) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("error", Boolean(isError));
}
