// brigd.mjs - a real brigd for the dashboard's tests, on a loopback port with a fresh state dir
// (like sdk/testlib/brigd.ts).  BRIG_BUILD: brigd and brig-agent (default build/);
// BRIG_TEMPLATE_CACHE: built templates (default /var/cache/brig/templates).  Needs root.
import { spawn } from "node:child_process";
import { chmodSync, closeSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const BUILD = process.env.BRIG_BUILD || join(REPO, "build");
const CACHE = process.env.BRIG_TEMPLATE_CACHE || "/var/cache/brig/templates";

function searchable(path) {
  for (let p = resolve(path); p !== "/"; p = dirname(p)) {
    const mode = statSync(p).mode;
    if (!(mode & 0o001)) chmodSync(p, (mode & 0o7777) | 0o111);
  }
}

/** A JSON client of the REST API with one key. */
export function client(url, key) {
  return async function call(method, path, body, { expect } = {}) {
    const r = await fetch(url + path, {
      method,
      headers: { Authorization: `Bearer ${key}`, ...(body !== undefined && typeof body !== "string" ? { "Content-Type": "application/json" } : {}) },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await r.text();
    if (expect ? !expect.includes(r.status) : r.status >= 300)
      throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return text && (r.headers.get("content-type") || "").startsWith("application/json") ? JSON.parse(text) : text;
  };
}

export async function startBrigd(config = "") {
  const stateDir = mkdtempSync(join(tmpdir(), "brig-ui-test-"));
  chmodSync(stateDir, 0o711);
  searchable(stateDir);
  const conf = join(stateDir, "brigd.conf");
  writeFileSync(conf, "[brigd]\n" + config);
  const logPath = join(stateDir, "brigd.log");
  const logFd = openSync(logPath, "a");
  const child = spawn(join(BUILD, "brigd"), [
    "--listen", "127.0.0.1:0", "--state-dir", stateDir, "--template-cache", CACHE,
    "--templates-dir", join(REPO, "templates"), "--agent", join(BUILD, "brig-agent"),
    "--ready-fd", "3", "--config", conf,
  ], {
    stdio: ["ignore", logFd, logFd, "pipe"],
    env: { ASAN_OPTIONS: "detect_leaks=1:abort_on_error=0:exitcode=23", UBSAN_OPTIONS: "print_stacktrace=1:halt_on_error=1", ...process.env },
  });
  closeSync(logFd);
  const log = () => {
    try {
      return readFileSync(logPath, "utf8");
    } catch {
      return "";
    }
  };
  const exited = new Promise((r) => child.on("exit", (code, sig) => r(code ?? sig ?? -1)));
  const url = await new Promise((res, rej) => {
    let line = "";
    const timer = setTimeout(() => rej(new Error("brigd not ready in 60 s:\n" + log())), 60000);
    child.stdio[3].on("data", (c) => {
      line += c;
      if (line.includes("\n")) {
        clearTimeout(timer);
        child.stdio[3].destroy();
        res(line.trim().split(/\s+/)[1]);
      }
    });
    child.on("exit", (code) => rej(new Error(`brigd exited (${code}):\n${log()}`)));
  });
  const key = readFileSync(join(stateDir, "admin.key"), "utf8").trim();
  const operatorKey = readFileSync(join(stateDir, "operator.key"), "utf8").trim();
  const admin = client(url, key);
  return {
    url, key, operatorKey, stateDir, admin, log,
    async stop() {
      const left = [];
      try {
        for (const s of (await admin("GET", "/v1/sandboxes")).sandboxes) {
          left.push(s.id);
          await admin("DELETE", `/v1/sandboxes/${s.id}`).catch(() => {});
        }
      } finally {
        child.kill("SIGTERM");
        let t;
        const rc = await Promise.race([exited, new Promise((r) => (t = setTimeout(() => r("timeout"), 60000)))]);
        clearTimeout(t);
        if (rc === "timeout") child.kill("SIGKILL");
        if (rc !== 0) throw new Error(`brigd stopped with ${rc}:\n${log().slice(-20000)}`);
        const mounts = readFileSync("/proc/self/mounts", "utf8").split("\n").filter((l) => l.includes(stateDir + "/"));
        let dirs = [];
        try {
          dirs = readdirSync(join(stateDir, "sandboxes"));
        } catch {
          /* none */
        }
        if (mounts.length || dirs.length) throw new Error(`brigd left behind: ${mounts.concat(dirs).join(", ")}`);
        rmSync(stateDir, { recursive: true, force: true });
      }
      return left;
    },
  };
}
