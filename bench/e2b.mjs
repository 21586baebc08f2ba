// bench/e2b.mjs - E2B's official SDK against brigd on warm-pool hits (docs/benchmarks.md, "E2B's
// SDK"): Sandbox.create("base") + commands.run("true"), timed together and apart, beside the same
// two steps through brig's own TypeScript SDK (Sandbox.create + exec; when sdk/build has built it)
// and through brig's REST API, in the same run.
//
//   . scripts/node-env; (cd tests/e2b && npm ci)   # the pinned SDK (tests/e2b/run does this)
//   sdk/build                                       # brig's own SDK (optional)
//   node bench/e2b.mjs [-n 100] [--build build] [--out FILE]
//
// Needs root and the `base` template built.  Between two samples the pool is refilled (its
// filler's start-up is not timed: a pool hit is the case measured), and every sandbox is killed.
import { performance } from "node:perf_hooks";
import { existsSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { loadavg } from "node:os";

const args = process.argv.slice(2);
const opt = (name, def) => (args.includes(name) ? args[args.indexOf(name) + 1] : def);
const N = Number(opt("-n", "100"));
const POOL = 2;

const { REPO, startBrigd } = await import("../tests/ui/brigd.mjs");
if (!process.env.BRIG_BUILD) process.env.BRIG_BUILD = join(REPO, opt("--build", "build"));
const require = createRequire(join(REPO, "tests/e2b/package.json"));
const { Sandbox } = await import(require.resolve("e2b"));
const brigSdk = join(REPO, "sdk/typescript/dist/index.js");
const Brig = existsSync(brigSdk) ? (await import(brigSdk)).Sandbox : null;

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { n: s.length, p50: q(0.5), p90: q(0.9), p99: q(0.99) };
}

const brigd = await startBrigd(`warm_pool = base:small:${POOL}\n`);
process.env.E2B_API_URL = brigd.url;
process.env.E2B_SANDBOX_URL = brigd.url;
process.env.E2B_API_KEY = brigd.key;

async function poolFull() {
  for (;;) {
    const h = await (await fetch(`${brigd.url}/healthz`)).json();
    const p = h.warm_pool["base/small"];
    if (p && p.ready >= p.target) return p;
    await new Promise((r) => setTimeout(r, 20)); // the filler's own pace: nothing to wait on
  }
}

process.env.BRIG_URL = brigd.url;
process.env.BRIG_API_KEY = brigd.key;

const e2b = { create: [], run: [], both: [] };
const sdk = { create: [], run: [], both: [] };
const own = { create: [], run: [], both: [] };
const load = [loadavg()[0]];
try {
  // one untimed round each: connections opened, code paths warm
  for (let i = 0; i < N + 1; i++) {
    await poolFull();
    const t0 = performance.now();
    const sbx = await Sandbox.create("base");
    const t1 = performance.now();
    await sbx.commands.run("true");
    const t2 = performance.now();
    await sbx.kill();
    if (i > 0) {
      e2b.create.push(t1 - t0);
      e2b.run.push(t2 - t1);
      e2b.both.push(t2 - t0);
    }
    if (Brig) {
      await poolFull();
      const b0 = performance.now();
      const sb = await Brig.create({ template: "base" });
      const b1 = performance.now();
      await sb.exec("true");
      const b2 = performance.now();
      await sb.kill();
      if (i > 0) {
        sdk.create.push(b1 - b0);
        sdk.run.push(b2 - b1);
        sdk.both.push(b2 - b0);
      }
    }
    await poolFull();
    const u0 = performance.now();
    const s = await brigd.admin("POST", "/v1/sandboxes", { template: "base" });
    const u1 = performance.now();
    await brigd.admin("POST", `/v1/sandboxes/${s.id}/exec`, { cmd: "true" });
    const u2 = performance.now();
    await brigd.admin("DELETE", `/v1/sandboxes/${s.id}`);
    if (i > 0) {
      own.create.push(u1 - u0);
      own.run.push(u2 - u1);
      own.both.push(u2 - u0);
    }
  }
  load.push(loadavg()[0]);
  const health = await (await fetch(`${brigd.url}/healthz`)).json();
  const out = {};
  const kinds = [["e2b SDK", e2b], ...(Brig ? [["brig SDK", sdk]] : []), ["brig REST", own]];
  for (const [name, m] of kinds)
    for (const k of ["create", "run", "both"]) out[`${name} ${k}`] = stats(m[k]);
  console.table(Object.fromEntries(Object.entries(out).map(([k, v]) => [k, { n: v.n, p50: v.p50.toFixed(2), p90: v.p90.toFixed(2), p99: v.p99.toFixed(2) }])));
  console.log("warm pool:", JSON.stringify(health.warm_pool));
  console.log("load average (1 min) at the start and the end:", load.map((x) => x.toFixed(2)).join(", "));
  if (opt("--out")) writeFileSync(opt("--out"), JSON.stringify({ load, warm_pool: health.warm_pool, ...out }, null, 1));
} finally {
  await brigd.stop();
}
