// sandboxes.js - the list: live sandboxes (GET /v1/sandboxes) and those that ended in the last
// day (GET /v1/sandboxes?state=ended, the server's list: any key, within its retention period).
import { api } from "./api.js";
import { h, fill, link, table, errorBox, field, select, ago, until, usd, time } from "./dom.js";

const REFRESH_MS = 3000;
const RECENT_MS = 86400e3; // "recently ended": the last day
const RECENT_MAX = 100;

async function recentlyEnded() {
  const since = new Date(Date.now() - RECENT_MS).toISOString();
  return (await api("GET", `/v1/sandboxes?state=ended&since=${encodeURIComponent(since)}&limit=${RECENT_MAX}`)).sandboxes;
}

/** The body of POST …/timeout that moves a sandbox's lifetime deadline 10 minutes later (the
 * API's timeout counts from now: a bare 600 would cut a longer life short). */
export function extendBody(sb, now = Date.now()) {
  const left = sb.expires_at ? Math.max(0, Math.ceil((Date.parse(sb.expires_at) - now) / 1000)) : 0;
  return { timeout: left + 600 };
}

/** What it has cost so far: an ended one's charge; a live one's estimate (60 s minimum). */
export function costOf(sb, now = Date.now()) {
  if (sb.cost_micro_usd !== undefined && sb.cost_micro_usd !== null) return usd(sb.cost_micro_usd);
  if (!sb.price_micro_usd_per_second) return "";
  const secs = Math.max(60, Math.ceil((now - Date.parse(sb.created_at)) / 1000));
  return "≈ " + usd(secs * sb.price_micro_usd_per_second);
}

export function renderSandboxes(view, ctx) {
  let stop = false, timer = null, gen = 0;
  const filters = { project: "", state: "", template: "", isolation: "" };
  const fProject = select([["", "all projects"]], "");
  const fState = select([["", "all states"], ["running", "running"], ["creating", "creating"],
    ["deleting", "deleting"], ["ended", "ended (deleted or failed)"]], "");
  const fTemplate = select([["", "all templates"]], "");
  const fIso = select([["", "all isolations"], ["container", "container"], ["gvisor", "gvisor"], ["microvm", "microvm"]], "");
  const status = h("p", { class: "status", role: "status" });
  const body = h("div");
  const filterBar = h("form", { class: "filters", "aria-label": "Filter sandboxes", onsubmit: (e) => e.preventDefault() },
    field("Project", fProject), field("State", fState), field("Template", fTemplate), field("Isolation", fIso),
    h("button", { type: "button", onclick: () => refresh() }, "Refresh"));
  for (const [el, k] of [[fProject, "project"], [fState, "state"], [fTemplate, "template"], [fIso, "isolation"]])
    el.addEventListener("change", () => {
      filters[k] = el.value;
      refresh();
    });
  fill(view, h("h1", { tabindex: "-1" }, "Sandboxes"), filterBar, status, body);

  api("GET", "/v1/projects").then((r) => {
    for (const p of r.projects) fProject.append(h("option", { value: p.id }, `${p.name} (${p.id})`));
  }).catch(() => {});
  api("GET", "/v1/templates").then((r) => {
    for (const t of r.templates) fTemplate.append(h("option", { value: t.ref || t.name }, t.ref || t.name));
  }).catch(() => {});

  const keep = (sb) =>
    (!filters.project || sb.project_id === filters.project) &&
    (!filters.template || sb.template === filters.template) &&
    (!filters.isolation || sb.isolation === filters.isolation) &&
    (!filters.state || (filters.state === "ended" ? ["deleted", "failed"].includes(sb.state) : sb.state === filters.state));

  async function act(what, sb) {
    status.textContent = "";
    try {
      if (what === "delete") {
        await api("DELETE", `/v1/sandboxes/${encodeURIComponent(sb.id)}`);
        status.textContent = `Deleted ${sb.id}.`;
      } else {
        const r = await api("POST", `/v1/sandboxes/${encodeURIComponent(sb.id)}/timeout`, extendBody(sb));
        status.textContent = `${sb.id} now lives 10 more minutes, until ${time(r.expires_at)}.`;
      }
    } catch (e) {
      fill(status, errorBox(e));
    }
    refresh();
  }

  function row(sb, now) {
    const live = !["deleted", "failed"].includes(sb.state);
    return h("tr", { "data-id": sb.id, "data-state": sb.state },
      h("td", {}, link(sb.id, "sandbox", sb.id)),
      h("td", {}, sb.project_id || ""),
      h("td", {}, sb.template || ""), h("td", {}, sb.tariff || ""), h("td", {}, sb.isolation || ""),
      h("td", { class: "state-" + sb.state }, sb.state),
      h("td", {}, ago(sb.created_at, now)),
      h("td", {}, live ? until(sb.idle_expires_at, now) : ""),
      h("td", {}, live ? until(sb.expires_at, now) : ""),
      h("td", {}, costOf(sb, now)),
      h("td", { class: "reason" }, sb.end_reason ? `${sb.end_reason} (${sb.reason})` : ""),
      h("td", { class: "actions" }, live && sb.state === "running" ? [
        h("button", { type: "button", "aria-label": `Extend ${sb.id} by 10 minutes`, onclick: () => act("timeout", sb) }, "+10 min"),
        h("button", { type: "button", class: "danger", "aria-label": `Delete ${sb.id}`, onclick: () => act("delete", sb) }, "Delete"),
      ] : ""));
  }

  async function refresh() {
    clearTimeout(timer);
    const mine = ++gen;
    try {
      const [live, ended] = await Promise.all([api("GET", "/v1/sandboxes").then((r) => r.sandboxes), recentlyEnded()]);
      if (stop || mine !== gen) return;
      const now = Date.now();
      const rows = [...live, ...ended].filter(keep).map((sb) => row(sb, now));
      // The table is rebuilt: keyboard focus in it goes back to the same control.
      const f = body.contains(document.activeElement) ? document.activeElement : null;
      const fKey = f && (f.getAttribute("aria-label") || f.getAttribute("href"));
      fill(body, table(`${live.length} live, ${ended.length} recently ended`,
        ["Sandbox", "Project", "Template", "Tariff", "Isolation", "State", "Age", "Idle deadline",
          "Lifetime deadline", "Cost so far", "End reason", "Actions"], rows));
      if (fKey)
        [...body.querySelectorAll("a, button")]
          .find((el) => (el.getAttribute("aria-label") || el.getAttribute("href")) === fKey)
          ?.focus();
    } catch (e) {
      if (stop || mine !== gen) return;
      fill(body, errorBox(e));
    }
    if (!stop && mine === gen) timer = setTimeout(refresh, REFRESH_MS);
  }
  refresh();
  return () => {
    stop = true;
    clearTimeout(timer);
  };
}
