// sandboxes.js - the list: live sandboxes (GET /v1/sandboxes) and recently ended ones (an admin
// key: the sandbox.ended events of the last day in GET /v1/audit; any key: those this tab saw).
import { api, raw, ApiError } from "./api.js";
import { h, fill, link, table, errorBox, field, select, ago, until, usd } from "./dom.js";

const SEEN = "brig.seen"; // ids this tab listed, so one that ended stays in view (no key in it)
const REFRESH_MS = 3000;

function seen() {
  try {
    return JSON.parse(sessionStorage.getItem(SEEN) || "[]");
  } catch {
    return [];
  }
}

function remember(ids) {
  const all = [...new Set([...seen(), ...ids])].slice(-200);
  sessionStorage.setItem(SEEN, JSON.stringify(all));
}

async function endedIds(ctx, live) {
  const ids = new Set(seen().filter((id) => !live.has(id)));
  if (ctx.who.scope === "admin") {
    const since = new Date(Date.now() - 86400e3).toISOString();
    const r = await fetchAudit(since);
    for (const e of r) if (e.kind === "sandbox.ended" && e.sandbox_id) ids.add(e.sandbox_id);
  }
  return [...ids].filter((id) => !live.has(id)).slice(-50);
}

async function fetchAudit(since) {
  const r = await raw(`/v1/audit?since=${encodeURIComponent(since)}&limit=5000`);
  return (await r.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
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
  const fIso = select([["", "all isolations"], ["container", "container"], ["gvisor", "gvisor"]], "");
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
    for (const t of r.templates) fTemplate.append(h("option", { value: t.name }, t.name));
  }).catch(() => {});

  const keep = (sb) =>
    (!filters.project || sb.project_id === filters.project) &&
    (!filters.template || sb.template === filters.template) &&
    (!filters.isolation || sb.isolation === filters.isolation) &&
    (!filters.state || (filters.state === "ended" ? ["deleted", "failed"].includes(sb.state) : sb.state === filters.state));

  async function act(what, sb) {
    status.textContent = "";
    try {
      if (what === "delete") await api("DELETE", `/v1/sandboxes/${encodeURIComponent(sb.id)}`);
      else await api("POST", `/v1/sandboxes/${encodeURIComponent(sb.id)}/timeout`, { timeout: 600 });
      status.textContent = what === "delete" ? `Deleted ${sb.id}.` : `${sb.id} now lives 10 more minutes.`;
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
      const live = (await api("GET", "/v1/sandboxes")).sandboxes;
      const liveIds = new Set(live.map((x) => x.id));
      remember([...liveIds]);
      const ended = [];
      for (const id of await endedIds(ctx, liveIds)) {
        try {
          ended.push(await api("GET", `/v1/sandboxes/${encodeURIComponent(id)}`));
        } catch (e) {
          if (!(e instanceof ApiError && e.status === 404)) throw e;
        }
      }
      ended.sort((a, b) => (b.deleted_at || "").localeCompare(a.deleted_at || ""));
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
