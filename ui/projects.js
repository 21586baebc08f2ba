// projects.js - each project's egress policy (everyone reads it; an admin key edits it) and its
// secrets by name (admin keys only: the API answers a sandbox key 403, and that is shown).
import { api } from "./api.js";
import { h, fill, errorBox, field, select } from "./dom.js";

function lines(v) {
  return v.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
}

function policyText(eg) {
  if (!eg) return "?";
  if (eg.mode !== "allowlist") return eg.mode;
  return `allowlist: ${(eg.domains || []).join(", ") || "no domains"}; CIDRs ${(eg.cidrs || []).join(", ") || "none"}; ` +
    `ports ${(eg.ports || []).join(", ") || "any"}`;
}

function egressForm(p, admin, onSaved) {
  const eg = p.egress || { mode: "open" };
  const mode = select([["open", "open"], ["allowlist", "allowlist"], ["none", "none"]], eg.mode);
  const domains = h("textarea", { rows: 3 }, (eg.domains || []).join("\n"));
  const cidrs = h("textarea", { rows: 2 }, (eg.cidrs || []).join("\n"));
  const ports = h("input", { type: "text", value: (eg.ports || []).join(", ") });
  const msg = h("p", { class: "status", role: "status" });
  const controls = [mode, domains, cidrs, ports];
  if (!admin) controls.forEach((c) => c.setAttribute("disabled", ""));
  const form = h("form", { class: "egress", "aria-label": `Egress policy of ${p.name}` },
    field("Egress mode", mode), field("Allowed domains (one a line)", domains),
    field("Allowed CIDRs", cidrs), field("Allowed ports", ports),
    admin ? h("button", { type: "submit" }, "Save egress policy")
      : h("p", { class: "note" }, "Only an admin key may change the policy."), msg);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { mode: mode.value };
    if (mode.value === "allowlist") {
      body.domains = lines(domains.value);
      body.cidrs = lines(cidrs.value);
      const pl = lines(ports.value).map(Number);
      if (pl.length) body.ports = pl;
    }
    msg.textContent = "Saving…";
    try {
      const np = await api("PATCH", `/v1/projects/${encodeURIComponent(p.id)}`, { egress: body });
      msg.textContent = "Saved: " + policyText(np.egress);
      onSaved(np);
    } catch (err) {
      fill(msg, errorBox(err));
    }
  });
  return form;
}

async function secrets(p, box) {
  try {
    const r = await api("GET", `/v1/projects/${encodeURIComponent(p.id)}/secrets`);
    fill(box, r.names.length ? h("ul", { class: "secrets" }, r.names.map((n) => h("li", {}, h("code", {}, n))))
      : h("p", {}, "No secrets."));
  } catch (e) {
    fill(box, errorBox(e));
  }
}

export function renderProjects(view, ctx) {
  const admin = ctx.who.scope === "admin";
  const list = h("div");
  fill(view, h("h1", { tabindex: "-1" }, "Projects"), list);
  api("GET", "/v1/projects").then((r) => {
    fill(list, r.projects.map((p) => {
      const current = h("p", { "data-fact": "egress" }, "Egress: ", policyText(p.egress));
      const sec = h("div", {}, "Loading…");
      secrets(p, sec);
      const iso = p.isolation ? `allowed ${p.isolation.allowed.join(", ")}, default ${p.isolation.default ?? "the host's"}` : "every mode";
      return h("section", { class: "project", "data-project": p.id, "aria-labelledby": "h-" + p.id },
        h("h2", { id: "h-" + p.id }, p.name, " ", h("code", {}, p.id)), current,
        h("p", {}, "Isolation: ", iso),
        egressForm(p, admin, (np) => fill(current, "Egress: ", policyText(np.egress))),
        h("h3", {}, "Secrets (names only)"), sec);
    }));
  }).catch((e) => fill(list, errorBox(e)));
  return () => {};
}
