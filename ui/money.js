// money.js - usage and money: the balance, today's and this month's spend against the limits,
// the spend per day and the ledger (GET /v1/account, /v1/account/usage, /v1/account/ledger).
import { api } from "./api.js";
import { h, fill, table, errorBox, usd, time } from "./dom.js";
import { barChart } from "./charts.js";

function meter(label, spent, limit) {
  const text = `${usd(spent)} of ${limit === null ? "no limit" : usd(limit)}`;
  return h("div", { class: "meter-row" }, h("span", { class: "meter-label" }, label),
    limit ? h("meter", { min: 0, max: limit, value: Math.min(spent, limit), "aria-label": `${label}: ${text}` }) : null,
    h("span", {}, text));
}

export function renderMoney(view) {
  let stop = false;
  const top = h("div"), chart = h("div"), ledger = h("div");
  fill(view, h("h1", { tabindex: "-1" }, "Usage and money"), top,
    h("section", { "aria-labelledby": "h-days" }, h("h2", { id: "h-days" }, "Spend per day"), chart),
    h("section", { "aria-labelledby": "h-ledger" }, h("h2", { id: "h-ledger" }, "Ledger"), ledger));
  api("GET", "/v1/account").then((a) => {
    if (stop) return;
    fill(top, h("dl", { class: "facts" },
      h("dt", {}, "Account"), h("dd", {}, a.id),
      h("dt", {}, "Balance"), h("dd", { "data-fact": "Balance", class: a.balance_micro_usd <= 0 ? "error" : "" }, a.balance),
      h("dt", {}, "Live sandboxes"), h("dd", {}, `${a.live_sandboxes} of ${a.max_live_sandboxes}`),
      h("dt", {}, "Tariffs"), h("dd", {}, a.tariffs ? a.tariffs.join(", ") : "all")),
    meter("Today", a.usage_today_micro_usd, a.daily_limit_micro_usd),
    meter("This month", a.usage_month_micro_usd, a.monthly_limit_micro_usd));
  }).catch((e) => !stop && fill(top, errorBox(e)));
  api("GET", "/v1/account/usage?days=30").then((u) => {
    if (stop) return;
    fill(chart, barChart("Spend per day, last 30 days (UTC)", u.days.map((d) => ({ label: d.date, value: d.spent_micro_usd })), { fmt: usd }));
  }).catch((e) => !stop && fill(chart, errorBox(e)));
  api("GET", "/v1/account/ledger?limit=100").then((l) => {
    if (stop) return;
    fill(ledger, table(`The last ${l.entries.length} entries, newest first`, ["When", "Kind", "Amount", "Sandbox", "Seconds", "Note"],
      l.entries.map((e) => h("tr", {}, h("td", {}, time(e.at)), h("td", {}, e.kind),
        h("td", { class: "num" }, (e.kind === "charge" ? "-" : "+") + usd(e.amount_micro_usd)),
        h("td", {}, e.sandbox_id ?? ""), h("td", { class: "num" }, e.seconds ?? ""), h("td", {}, e.note ?? "")))));
  }).catch((e) => !stop && fill(ledger, errorBox(e)));
  return () => (stop = true);
}
