// bench/e2b_ab.mjs - E2B's official SDK against two brigd builds side by side (A/B): on a
// warm-pool hit, Sandbox.create("base") + commands.run("true"), the two brigds' samples
// interleaved (A B, then B A, ...) so that the host's noise hits both alike.  Prints p50/p90 of
// each and the median of the per-sample B/A ratios.
//
//   . scripts/node-env; (cd tests/e2b && npm ci)
//   unshare -n sh -c 'ip link set lo up; node bench/e2b_ab.mjs --a /tmp/base/build --b build -n 100'
//
// Both brigds run with `network = off` (only one brigd per network namespace may manage
// sandbox networking) and `warm_pool = base:small:2`; before each sample the harness waits
// until both brigds' pools are full, so every create is a hit and no refill runs beside it.
import { spawn } from "node:child_process";
import { chmodSync, closeSync, mkdtempSync, openSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const opt = (name, def) => (args.includes(name) ? args[args.indexOf(name) + 1] : def);
const N = Number(opt("-n", "100"));
const CACHE = process.env.BRIG_TEMPLATE_CACHE || "/var/cache/brig/templates";
const require = createRequire(join(REPO, "tests/e2b/package.json"));
const { Sandbox } = await import(require.resolve("e2b"));

function searchable(path) {
  for (let p = resolve(path); p !== "/"; p = dirname(p)) {
    const mode = statSync(p).mode;
    if (!(mode & 0o001)) chmodSync(p, (mode & 0o7777) | 0o111);
  }
}

async function start(build) {
  build = resolve(build);
  const stateDir = mkdtempSync(join(tmpdir(), "brig-e2b-ab-"));
  searchable(stateDir);
  const conf = join(stateDir, "brigd.conf");
  writeFileSync(conf, "[brigd]\nnetwork = off\nwarm_pool = base:small:2\n");
  const logFd = openSync(join(stateDir, "brigd.log"), "a");
  const child = spawn(join(build, "brigd"), [
    "--listen", "127.0.0.1:0", "--state-dir", stateDir, "--template-cache", CACHE,
    "--templates-dir", join(REPO, "templates"), "--agent", join(build, "brig-agent"),
    "--ready-fd", "3", "--config", conf,
  ], { stdio: ["ignore", logFd, logFd, "pipe"] });
  closeSync(logFd);
  const url = await new Promise((res, rej) => {
    let line = "";
    child.stdio[3].on("data", (c) => {
      line += c;
      if (line.includes("\n")) {
        child.stdio[3].destroy();
        res(line.trim().split(/\s+/)[1]);
      }
    });
    child.on("exit", (code) => rej(new Error(`brigd ${build} exited (${code})`)));
  });
  const key = readFileSync(join(stateDir, "admin.key"), "utf8").trim();
  const exited = new Promise((r) => child.on("exit", r));
  return { url, key, stop: async () => { child.kill("SIGTERM"); await exited; } };
}

async function poolFull(d) {
  for (;;) {
    const h = await (await fetch(`${d.url}/healthz`)).json();
    const p = h.warm_pool["base/small"];
    if (p && p.ready >= p.target) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Both pools full: the other brigd's refill (a cold sandbox start) must not run beside a sample.
async function sample(d) {
  for (const x of ds) await poolFull(x);
  const o = { apiKey: d.key, apiUrl: d.url, sandboxUrl: d.url };
  const t0 = performance.now();
  const sbx = await Sandbox.create("base", o);
  const t1 = performance.now();
  await sbx.commands.run("true");
  const t2 = performance.now();
  await sbx.kill();
  return [t1 - t0, t2 - t1, t2 - t0];
}

const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const ds = [await start(opt("--a")), await start(opt("--b"))];
try {
  const t = [[[], [], []], [[], [], []]];
  for (let i = 0; i < N + 2; i++) {
    for (const k of i % 2 ? [1, 0] : [0, 1]) {
      const s = await sample(ds[k]);
      if (i >= 2) s.forEach((v, j) => t[k][j].push(v));
    }
  }
  for (const [j, what] of ["create", "run", "both"].entries()) {
    const ratios = t[1][j].map((b, i) => b / t[0][j][i]);
    console.log(`${what.padEnd(6)} A p50 ${q(t[0][j], 0.5).toFixed(2)} p90 ${q(t[0][j], 0.9).toFixed(2)}` +
      ` | B p50 ${q(t[1][j], 0.5).toFixed(2)} p90 ${q(t[1][j], 0.9).toFixed(2)} ms` +
      ` | B/A median ratio ${q(ratios, 0.5).toFixed(3)}`);
  }
} finally {
  for (const d of ds) await d.stop();
}
