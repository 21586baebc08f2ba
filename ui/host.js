// host.js - the host: capacity, warm pool and queue (GET /healthz), a summary of GET /metrics
// (an admin or the operator key), and for the operator the accounts (GET /v1/accounts).
import { api, raw } from "./api.js";
import { h, fill, table, errorBox, usd, time } from "./dom.js";

/** Prometheus text -> [{name, labels: {}, value}] (the lines the dashboard sums up). */
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || line.startsWith("#")) continue;
    const labels = {};
    for (const l of (m[3] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

function sum(ms, name, pred = () => true) {
  return ms.filter((x) => x.name === name && pred(x.labels)).reduce((a, x) => a + x.value, 0);
}

function used(u, cap) {
  return cap ? `${u} of ${cap}` : `${u} (no bound)`;
}

export function renderHost(view, ctx) {
  let stop = false;
  const health = h("div"), metrics = h("div"), accounts = h("div");
  fill(view, h("h1", { tabindex: "-1" }, "Host"), health,
    h("section", { "aria-labelledby": "h-metrics" }, h("h2", { id: "h-metrics" }, "Metrics summary"), metrics),
    ctx.who.scope === "operator" ? h("section", { "aria-labelledby": "h-accounts" }, h("h2", { id: "h-accounts" }, "Accounts"), accounts) : null);
  fetch("/healthz", { cache: "no-store" }).then((r) => r.json()).then((x) => {
    if (stop) return;
    const pool = Object.entries(x.warm_pool || {});
    fill(health, h("dl", { class: "facts" },
      [["Version", x.version], ["Runtime", x.runtime], ["Networking", x.network ? "on" : "off"],
        ["Sandboxes (slots)", used(x.slots_used, x.capacity)],
        ["Memory (MiB)", used(x.memory_mib_used, x.memory_mib_capacity)],
        ["Disk (MiB)", used(x.disk_mib_used, x.disk_mib_capacity)], ["Queued creates", x.queued]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v)])),
    table("Warm pool", ["Template/tariff", "Ready", "Target", "Hits", "Misses"],
      pool.length ? pool.map(([k, p]) => h("tr", {}, h("td", {}, k), h("td", {}, p.ready), h("td", {}, p.target), h("td", {}, p.hits), h("td", {}, p.misses)))
        : h("tr", {}, h("td", { colspan: 5 }, "No warm pool configured."))));
  }).catch((e) => !stop && fill(health, errorBox(e)));
  if (ctx.who.scope === "sandbox") fill(metrics, h("p", { class: "note" }, "The host's metrics need an admin or the operator key."));
  else raw("/metrics").then((r) => r.text()).then((t) => {
    if (stop) return;
    const ms = parseMetrics(t);
    const ended = ms.filter((x) => x.name === "brig_sandboxes_ended_total" && x.value > 0);
    fill(metrics, h("dl", { class: "facts" },
      [["Live sandboxes", sum(ms, "brig_sandboxes_live")], ["Running", sum(ms, "brig_sandboxes_running")],
        ["Created", sum(ms, "brig_sandboxes_created_total")], ["Creates failed", sum(ms, "brig_sandbox_creates_failed_total")],
        ["Refused creates", sum(ms, "brig_admission_refused_total")], ["API requests", sum(ms, "brig_http_requests_total")],
        ["API errors (5xx)", sum(ms, "brig_http_requests_total", (l) => (l.status || "").startsWith("5"))],
        ["Agent errors", sum(ms, "brig_agent_errors_total")], ["Charged", usd(sum(ms, "brig_billing_charged_micro_usd_total"))]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v)])),
    table("Sandboxes ended, by reason", ["Reason", "Count"], ended.map((x) => h("tr", {}, h("td", {}, x.labels.reason), h("td", {}, x.value)))));
  }).catch((e) => !stop && fill(metrics, errorBox(e)));
  if (ctx.who.scope === "operator")
    api("GET", "/v1/accounts").then((r) => {
      if (stop) return;
      fill(accounts, table(`${r.accounts.length} accounts`, ["Account", "Name", "Created", "Balance", "Spent today", "Spent this month", "Live sandboxes"],
        r.accounts.map((a) => h("tr", {}, h("td", {}, a.id), h("td", {}, a.name), h("td", {}, time(a.created_at)),
          h("td", { class: "num" }, a.balance), h("td", { class: "num" }, usd(a.usage_today_micro_usd)),
          h("td", { class: "num" }, usd(a.usage_month_micro_usd)), h("td", {}, `${a.live_sandboxes} of ${a.max_live_sandboxes}`)))));
    }).catch((e) => !stop && fill(accounts, errorBox(e)));
  return () => (stop = true);
}
