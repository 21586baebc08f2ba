// terminal.js - a terminal on one sandbox, over the public API only, as `brig shell` does it:
// a login shell started as a background process on a pseudo-terminal (POST …/exec with "pty"
// and "background"), its output followed (…/processes/{pid}/output, NDJSON), keystrokes sent to
// …/processes/{pid}/stdin (one request in flight, the rest batched behind it, so bytes stay in
// order), the size to …/resize (the latest wins).  Closing it hangs the shell up (SIGHUP, as a
// closed terminal does) and kills what is left (SIGKILL) if it has not exited 2 s later.
// Rendered by xterm.js (ui/vendor/, from npm, MIT).
import "./cspstyle.js";
import { Terminal } from "./xterm.mjs";
import { FitAddon } from "./addon-fit.mjs";
import { api, ndjson, postBytes, session } from "./api.js";
import { errorText } from "./dom.js";

const enc = encodeURIComponent;
// Without a command: bash as a login shell, or sh where the template has no bash (as brig shell).
const SHELL = "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l";
const HANGUP_WAIT_S = 2;

function fromBase64(b64) {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** Opens a terminal in box (an empty element) on sandbox id.  Calls onState(text) as it changes;
 * returns {close(), pid()}; close() ends the process and resolves once it is asked to end. */
export function openTerminal(box, id, onState) {
  const term = new Terminal({ convertEol: false, cursorBlink: true, fontSize: 13, scrollback: 2000 });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  // Shift+Tab leaves the terminal (Tab itself is the shell's: completion): no keyboard trap.
  term.attachCustomKeyEventHandler((e) => !(e.key === "Tab" && e.shiftKey));
  fit.fit();

  const abort = new AbortController();
  const base = () => `/v1/sandboxes/${enc(id)}/processes/${pid}`;
  let pid = null, ended = false, closed = false;
  let pending = [], sending = false, size = null, sizing = false;
  const encoder = new TextEncoder();

  async function pump() {
    if (sending || !pending.length || ended || pid === null) return;
    sending = true;
    const n = pending.reduce((a, b) => a + b.length, 0), buf = new Uint8Array(n);
    let off = 0;
    for (const p of pending) buf.set(p, (off += p.length) - p.length);
    pending = [];
    try {
      await postBytes(base() + "/stdin", buf);
    } catch (e) {
      if (!ended) onState(`Input refused: ${e.status ?? ""} ${e.message}`);
    }
    sending = false;
    pump();
  }
  async function resize() {
    if (sizing || !size || ended || pid === null) return;
    const s = size;
    size = null;
    sizing = true;
    await api("POST", base() + "/resize", s).catch(() => {}); // a lost resize only misdraws until the next
    sizing = false;
    resize();
  }
  term.onData((d) => {
    pending.push(encoder.encode(d));
    pump();
  });
  term.onBinary((d) => {
    pending.push(Uint8Array.from(d, (c) => c.charCodeAt(0) & 255));
    pump();
  });
  term.onResize(({ cols, rows }) => {
    size = { cols, rows };
    if (pid !== null && !ended) onState(`Running: pid ${pid}, ${cols}×${rows}.`);
    resize();
  });
  const seen = new ResizeObserver(() => fit.fit());
  seen.observe(box);

  function finish(text) {
    ended = true;
    seen.disconnect();
    term.options.disableStdin = true;
    term.options.cursorBlink = false;
    onState(text);
  }

  async function follow() {
    for await (const ev of ndjson(base() + "/output", { signal: abort.signal })) {
      if (ev.type === "stdout" || ev.type === "stderr")
        term.write(ev.encoding === "base64" ? fromBase64(ev.data) : ev.data);
      else if (ev.type === "exit")
        return finish(`Ended: ${ev.reason ?? "exited"}, exit ${ev.exit_code ?? "–"}${ev.signal ? `, signal ${ev.signal}` : ""}.`);
      else if (ev.type === "dropped") term.write(`\r\n[${ev.bytes} bytes of output dropped]\r\n`);
      else if (ev.type === "error") return finish(`Ended: ${ev.code}: ${ev.message}`);
    }
    if (!ended) finish("Ended: the output stream closed.");
  }

  const started = (async () => {
    try {
      const p = await api("POST", `/v1/sandboxes/${enc(id)}/exec`, {
        argv: ["/bin/sh", "-c", SHELL], background: true, pty: { cols: term.cols, rows: term.rows },
      });
      pid = p.pid;
      box.dataset.pid = String(pid);
      if (closed) { // closed while the shell was starting: it ends at once
        await api("POST", base() + "/signal", { signal: "SIGHUP" }).catch(() => {});
        return;
      }
      onState(`Running: pid ${pid}, ${term.cols}×${term.rows}.`);
      pump();
      resize();
      term.focus();
      await follow();
    } catch (e) {
      if (!closed) finish(`Could not open a terminal: ${errorText(e)}`);
    }
  })();

  async function close() {
    if (closed) return;
    closed = true;
    const running = pid !== null && !ended;
    let how = "Closed.";
    if (running) {
      try {
        await api("POST", base() + "/signal", { signal: "SIGHUP" });
        const p = await api("POST", base() + "/wait", { timeout: HANGUP_WAIT_S });
        how = "Closed: the shell was hung up.";
        if (p.running) {
          await api("POST", base() + "/signal", { signal: "SIGKILL" });
          how = `Closed: the shell outlived its hang-up by ${HANGUP_WAIT_S} s and was killed.`;
        }
      } catch {
        /* it ended already, or the sandbox did */
      }
    }
    abort.abort();
    await started;
    if (running || !ended) finish(how); // an end seen before Close keeps its own words
    term.dispose();
  }

  /** For a page being unloaded: the hang-up only, sent so that it outlives the page. */
  function hangUp() {
    if (pid === null || ended || closed) return;
    fetch(base() + "/signal", {
      method: "POST", keepalive: true,
      headers: { Authorization: "Bearer " + session.key(), "Content-Type": "application/json" },
      body: JSON.stringify({ signal: "SIGHUP" }),
    }).catch(() => {});
  }
  return { close, hangUp, pid: () => pid };
}
