// sandbox.js - one sandbox: its facts, its timeline (followed live while it runs), its metrics
// as charts, its processes, a file browser and a terminal (terminal.js, loaded when opened).
import { api, raw, ndjson } from "./api.js";
import { h, fill, table, errorBox, field, ago, until, time, bytes, dur } from "./dom.js";
import { lineChart } from "./charts.js";
import { costOf, extendBody } from "./sandboxes.js";

const enc = encodeURIComponent;
const ENDED = ["deleted", "failed"];

/** One line of text for an event: what happened, from its data (always text, never HTML). */
export function summary(e) {
  const d = e.data || {};
  const cmd = d.command ?? (Array.isArray(d.argv) ? d.argv.join(" ") : "");
  switch (e.kind) {
    case "sandbox.created":
      return `${d.template}/${d.tariff}, ${d.isolation}, egress ${d.egress?.mode ?? "?"}${d.warm ? ", warm" : ""}`;
    case "exec":
    case "exec.ended": {
      const end = d.ended_at || e.kind === "exec.ended"
        ? ` → exit ${d.exit_code ?? "–"}${d.signal ? " signal " + d.signal : ""}, ${d.reason ?? ""}` +
          (d.duration_ms !== undefined ? `, ${dur(d.duration_ms)}` : "")
        : d.background ? " (started in the background)" : "";
      return `${cmd}${end}${d.error ? " — " + d.error : ""}`;
    }
    case "file.write": case "tar.write": case "file.read": case "tar.read":
      return `${d.path} ${bytes(d.size)} sha256 ${String(d.sha256 || "").slice(0, 12)}…${d.redacted ? " (redacted)" : ""}`;
    case "file.delete": case "file.mkdir":
      return `${d.path}${d.recursive ? " (recursive)" : ""}`;
    case "file.move":
      return `${d.from} → ${d.to}`;
    case "dns":
      return `${d.name} ${d.type} ${d.allowed ? "answered" : "refused"} (${d.rcode})` +
        (d.answer && d.answer.length ? " → " + d.answer.join(", ") : "");
    case "net.denied":
      return `${d.proto} ${d.src} → ${d.dst}${d.dport ? ":" + d.dport : ""} denied (${d.reason})`;
    case "sandbox.timeout":
      return `lifetime until ${time(d.expires_at)}`;
    case "project.policy":
      return `egress → ${d.egress?.mode ?? "?"}`;
    case "sandbox.ended":
      return `${d.state}: ${d.end_reason} (${d.reason})${d.last_words ? " — " + d.last_words : ""}`;
    case "process.signal":
      return `pid ${d.pid} ${d.name || d.signal}`;
    case "process.stdin":
      return `pid ${d.pid}: ${bytes(d.bytes)} of input`;
    case "process.stdin_close":
      return `pid ${d.pid}: input closed`;
    default:
      return JSON.stringify(d);
  }
}

function facts(sb) {
  const live = !ENDED.includes(sb.state);
  const rows = [
    ["State", sb.state], ["Project", sb.project_id], ["Template", sb.template], ["Tariff", sb.tariff],
    ["Isolation", sb.isolation], ["Created", `${time(sb.created_at)} (${ago(sb.created_at)} ago)`],
    live ? ["Idle deadline", `${time(sb.idle_expires_at)} (${until(sb.idle_expires_at)})`] : null,
    live ? ["Lifetime deadline", `${time(sb.expires_at)} (${until(sb.expires_at)})`] : null,
    live ? ["Price", sb.price_per_second + " per second"] : ["Ended", time(sb.deleted_at)],
    ["Cost so far", costOf(sb)],
    !live ? ["End reason", `${sb.end_reason} (${sb.reason})`] : null,
    sb.secrets ? ["Secrets", sb.secrets.join(", ") || "none"] : null,
  ].filter(Boolean);
  return h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v ?? "")]));
}

export function renderSandbox(view, ctx, id) {
  const abort = new AbortController();
  let stop = false;
  const timers = [];
  const head = h("div");
  const status = h("p", { class: "status", role: "status" });
  const tl = h("ol", { class: "timeline", "aria-label": "Timeline" });
  const tlState = h("p", { class: "status", id: "follow-state" });
  const charts = h("div", { class: "charts" });
  const procs = h("div");
  const files = h("div");
  const term = h("div");
  fill(view,
    h("h1", { tabindex: "-1" }, "Sandbox ", h("code", {}, id)),
    head, status,
    h("section", { "aria-labelledby": "h-timeline" }, h("h2", { id: "h-timeline" }, "Timeline"), tlState, tl),
    h("section", { "aria-labelledby": "h-metrics" }, h("h2", { id: "h-metrics" }, "Metrics"), charts),
    h("section", { "aria-labelledby": "h-procs" }, h("h2", { id: "h-procs" }, "Processes"), procs),
    h("section", { "aria-labelledby": "h-files" }, h("h2", { id: "h-files" }, "Files"), files),
    h("section", { "aria-labelledby": "h-term" }, h("h2", { id: "h-term" }, "Terminal"), term));

  let sb = null;
  async function loadInfo() {
    try {
      sb = await api("GET", `/v1/sandboxes/${enc(id)}`, undefined, { signal: abort.signal });
      const live = !ENDED.includes(sb.state);
      fill(head, facts(sb), live ? h("p", { class: "actions" },
        h("button", { type: "button", onclick: () => act("timeout") }, "Extend by 10 minutes"),
        h("button", { type: "button", class: "danger", onclick: () => act("delete") }, "Delete sandbox")) : "");
    } catch (e) {
      if (!stop) fill(head, errorBox(e));
    }
    return sb;
  }
  async function act(what) {
    try {
      if (what === "delete") await api("DELETE", `/v1/sandboxes/${enc(id)}`);
      else await api("POST", `/v1/sandboxes/${enc(id)}/timeout`, extendBody(sb));
      status.textContent = what === "delete" ? "Deleted." : "It now lives 10 more minutes.";
    } catch (e) {
      fill(status, errorBox(e));
    }
    loadInfo();
  }

  const shown = new Set();
  let typing = null; // the last line, while it counts one process's consecutive input writes
  function addEvent(e) {
    if (shown.has(e.seq)) return;
    shown.add(e.seq);
    // A terminal sends each keystroke as one write: consecutive ones of a process are one line.
    if (e.kind === "process.stdin" && typing?.pid === e.data?.pid && tl.lastElementChild === typing.li) {
      typing.bytes += e.data.bytes || 0;
      typing.writes++;
      typing.li.querySelector(".what").textContent = `pid ${typing.pid}: ${bytes(typing.bytes)} of input in ${typing.writes} writes`;
      return;
    }
    typing = null;
    if (e.kind === "process.stdin") typing = { pid: e.data?.pid, bytes: e.data?.bytes || 0, writes: 1, li: null };
    tl.append(h("li", { "data-kind": e.kind, class: "ev-" + e.kind.replace(".", "-") },
      h("time", { datetime: e.at }, time(e.at)), " ", h("span", { class: "kind" }, e.kind), " ",
      h("span", { class: "what" }, summary(e))));
    if (typing) typing.li = tl.lastElementChild;
  }
  async function timeline() {
    try {
      let after = 0;
      for (;;) {
        const r = await api("GET", `/v1/sandboxes/${enc(id)}/timeline?after=${after}&limit=1000`, undefined, { signal: abort.signal });
        r.events.forEach(addEvent);
        if (r.ended) {
          tlState.textContent = "Ended: the whole timeline.";
          return;
        }
        if (r.next_after === null) break;
        after = r.next_after;
      }
      tlState.textContent = "Following live…";
      for await (const e of ndjson(`/v1/sandboxes/${enc(id)}/timeline?follow=1`, { signal: abort.signal })) addEvent(e);
      tlState.textContent = "Ended: the whole timeline.";
      loadInfo();
    } catch (e) {
      if (!stop) fill(tlState, errorBox(e));
    }
  }

  async function metrics(memLimit) {
    try {
      const m = await api("GET", `/v1/sandboxes/${enc(id)}/metrics`, undefined, { signal: abort.signal });
      const sm = m.samples || [];
      const rate = (k) => sm.map((x, i) => (i && x[k] !== null && sm[i - 1][k] !== null ? Math.max(0, x[k] - sm[i - 1][k]) / m.interval : null));
      fill(charts,
        lineChart("CPU (% of one CPU)", [{ name: "CPU", cls: "s1", values: sm.map((x) => x.cpu_percent) }], { fmt: (v) => v.toFixed(1) + " %" }),
        lineChart("Memory", [{ name: "used", cls: "s1", values: sm.map((x) => x.memory_bytes) }],
          { limit: memLimit ? { value: memLimit, label: "limit " + bytes(memLimit) } : null, fmt: bytes }),
        lineChart("Network (bytes/s)", [{ name: "in", cls: "s1", values: rate("net_bytes_in") },
          { name: "out", cls: "s2", values: rate("net_bytes_out") }], { fmt: (v) => bytes(Math.round(v)) + "/s" }),
        h("p", { class: "note" }, `${sm.length} samples every ${m.interval} s; ${m.execs} commands; ` +
          (m.latest ? `${m.latest.pids ?? "?"} tasks, disk ${bytes(m.latest.disk_bytes)}` : "no sample yet")));
      if (m.state === "running" && !stop) timers.push(setTimeout(() => metrics(memLimit), m.interval * 1000));
    } catch (e) {
      if (!stop) fill(charts, errorBox(e));
    }
  }

  async function processes() {
    try {
      const r = await api("GET", `/v1/sandboxes/${enc(id)}/processes`, undefined, { signal: abort.signal });
      fill(procs, table(`${r.processes.length} processes`, ["PID", "Command", "User", "Started", "Running", "Exit", "Reason"],
        r.processes.map((p) => h("tr", {}, h("td", {}, p.pid), h("td", {}, p.cmd ?? (p.argv || []).join(" ")),
          h("td", {}, p.user), h("td", {}, time(p.started_at)), h("td", {}, p.running ? "yes" : "no"),
          h("td", {}, p.exit_code ?? ""), h("td", {}, p.reason ?? "")))),
      h("button", { type: "button", onclick: processes }, "Refresh processes"));
    } catch (e) {
      if (!stop) fill(procs, sb && ENDED.includes(sb.state) ? h("p", {}, "It ended: no processes.") : errorBox(e));
    }
  }

  const pathIn = h("input", { type: "text", value: "/root", spellcheck: "false" });
  const listing = h("div");
  async function list(path) {
    pathIn.value = path;
    try {
      const r = await api("GET", `/v1/sandboxes/${enc(id)}/files?path=${enc(path)}&list=1`, undefined, { signal: abort.signal });
      const up = path.replace(/\/[^/]*\/?$/, "") || "/";
      fill(listing, table(path, ["Name", "Type", "Size", "Mode", "Modified", ""], [
        path !== "/" ? h("tr", {}, h("td", {}, h("button", { type: "button", class: "linklike", onclick: () => list(up) }, "..")), h("td", {}, "dir")) : null,
        ...r.entries.map((f) => {
          const full = (path.endsWith("/") ? path : path + "/") + f.name;
          return h("tr", {},
            h("td", {}, f.type === "dir" ? h("button", { type: "button", class: "linklike", onclick: () => list(full) }, f.name) : f.name),
            h("td", {}, f.type + (f.target ? " → " + f.target : "")), h("td", {}, f.type === "file" ? bytes(f.size) : ""),
            h("td", {}, f.mode), h("td", {}, time(f.mtime)),
            h("td", {}, f.type === "file" && !f.name_b64 ? h("button", { type: "button", "aria-label": "Download " + f.name, onclick: () => download(full, f.name) }, "Download") : ""));
        })]));
    } catch (e) {
      fill(listing, errorBox(e));
    }
  }
  async function download(path, name) {
    try {
      const r = await raw(`/v1/sandboxes/${enc(id)}/files?path=${enc(path)}`);
      const url = URL.createObjectURL(await r.blob());
      const a = h("a", { href: url, download: name, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      fill(status, errorBox(e));
    }
  }
  fill(files, h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); list(pathIn.value); } },
    field("Directory", pathIn), h("button", { type: "submit" }, "List")), listing);

  // The terminal: a shell on a pseudo-terminal through the API, opened on demand; leaving the
  // view closes it (the shell is hung up), and so does closing the tab.
  let shell = null;
  const termState = h("p", { class: "status", role: "status", id: "term-state" });
  const termBox = h("div", { class: "terminal-box", hidden: true });
  const openBtn = h("button", { type: "button", onclick: () => openShell() }, "Open terminal");
  const closeBtn = h("button", { type: "button", hidden: true, onclick: () => closeShell() }, "Close terminal");
  async function openShell() {
    openBtn.hidden = true;
    closeBtn.hidden = false;
    termBox.hidden = false;
    termBox.replaceChildren();
    termState.textContent = "Starting a shell…";
    try {
      const { openTerminal } = await import("./terminal.js");
      if (stop) return;
      shell = openTerminal(termBox, id, (text) => (termState.textContent = text));
      termBox.scrollIntoView({ block: "nearest" }); // xterm.js draws only while it is in view
    } catch (e) {
      termState.textContent = "";
      fill(termState, errorBox(e));
    }
  }
  async function closeShell() {
    closeBtn.hidden = true;
    const s = shell;
    shell = null;
    await s?.close();
    termBox.hidden = true;
    openBtn.hidden = false;
    openBtn.focus();
  }
  const hangUp = () => shell?.hangUp();
  window.addEventListener("pagehide", hangUp);
  function terminal() {
    fill(term, h("p", { class: "note" }, "A shell in the sandbox on a pseudo-terminal, through the API (the key's own rights). " +
      "Tab goes to the shell; Shift+Tab leaves the terminal. Closing it hangs the shell up."),
      h("p", { class: "actions" }, openBtn, closeBtn), termState, termBox);
  }

  (async () => {
    const [s, tariffs] = await Promise.all([loadInfo(), api("GET", "/v1/tariffs").catch(() => null)]);
    timeline();
    if (!s) return;
    const t = tariffs?.tariffs.find((x) => x.name === s.tariff);
    metrics(t ? t.memory_mib * 1048576 : null);
    if (!ENDED.includes(s.state)) {
      processes();
      list("/root");
      terminal();
    } else {
      fill(procs, h("p", {}, "It ended: no processes."));
      fill(files, h("p", {}, "It ended: its files are gone."));
      fill(term, h("p", {}, "It ended: no terminal."));
    }
  })();
  return () => {
    stop = true;
    abort.abort();
    timers.forEach(clearTimeout);
    window.removeEventListener("pagehide", hangUp);
    shell?.close();
  };
}
