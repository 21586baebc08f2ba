/**
 * testlib/brigd.ts - starts a real brigd for the SDK and MCP tests.
 *
 * BRIG_BUILD names the directory with brigd and brig-agent (default: the
 * repository's build/), BRIG_TEMPLATE_CACHE the built templates (default
 * /var/cache/brig/templates).  Needs root, like brig's integration tests.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { BrigClient, Sandbox } from "@brig/sdk";

/** The repository root: this file runs from sdk/.test-build/testlib/. */
export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
export const BUILD = process.env.BRIG_BUILD || join(REPO, "build");
export const TEMPLATE_CACHE = process.env.BRIG_TEMPLATE_CACHE || "/var/cache/brig/templates";

export interface Brigd {
  url: string;
  key: string;
  stateDir: string;
  /** A client for this brigd with the admin key. */
  client: BrigClient;
  /** The operator key (accounts, credits, template builds). */
  operatorKey: string;
  /** brigd's log so far (for assertion messages). */
  log(): string;
  /**
   * Deletes every sandbox still there, stops brigd with SIGTERM and removes
   * its state; returns the ids of the sandboxes that were left (a test leaked them).
   */
  stop(): Promise<string[]>;
}

/** Makes every ancestor of `path` searchable: sandboxes run as unprivileged uids below it. */
function searchable(path: string): void {
  for (let p = resolve(path); p !== "/"; p = dirname(p)) {
    const mode = statSync(p).mode;
    if (!(mode & 0o001)) chmodSync(p, (mode & 0o7777) | 0o111);
  }
}

/** What deleted sandboxes could leave behind: mounts below the state dir, sandbox directories. */
function leftovers(stateDir: string): string[] {
  const left = readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[1] ?? "")
    .filter((m) => m.startsWith(stateDir + "/"))
    .map((m) => `mount ${m}`);
  try {
    left.push(...readdirSync(join(stateDir, "sandboxes")).map((d) => `sandbox dir ${d}`));
  } catch {
    /* no sandboxes directory */
  }
  return left;
}

function waitReady(child: ChildProcess, log: () => string, timeoutMs: number): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    let line = "";
    const timer = setTimeout(() => fail(new Error(`brigd not ready in ${timeoutMs} ms:\n${log()}`)), timeoutMs);
    const fd3 = child.stdio[3]!;
    function fail(e: Error) {
      clearTimeout(timer);
      reject(e);
    }
    fd3.on("data", (chunk: Buffer) => {
      line += chunk.toString();
      if (line.includes("\n")) {
        clearTimeout(timer);
        fd3.removeAllListeners("data");
        (fd3 as NodeJS.ReadableStream & { destroy(): void }).destroy();
        resolvePromise(line.trim().split(/\s+/)[1]!);
      }
    });
    child.on("exit", (code, sig) => fail(new Error(`brigd exited (${code ?? sig}) during start-up:\n${log()}`)));
  });
}

/**
 * Starts brigd on a loopback port with a fresh state directory; `config` is
 * the text of a config file (e.g. `[brigd]\nmax_live_per_account = 1\n`).
 */
export async function startBrigd(options: { args?: string[]; config?: string } = {}): Promise<Brigd> {
  const stateDir = mkdtempSync(join(tmpdir(), "brig-sdk-test-"));
  chmodSync(stateDir, 0o711);
  searchable(stateDir);
  const extraArgs = [...(options.args ?? [])];
  if (options.config !== undefined) {
    const conf = join(stateDir, "brigd.conf");
    writeFileSync(conf, options.config);
    extraArgs.push("--config", conf);
  }
  const logPath = join(stateDir, "brigd.log");
  const logFd = openSync(logPath, "a");
  const child = spawn(
    join(BUILD, "brigd"),
    [
      "--listen", "127.0.0.1:0",
      "--state-dir", stateDir,
      "--template-cache", TEMPLATE_CACHE,
      "--templates-dir", join(REPO, "templates"),
      "--agent", join(BUILD, "brig-agent"),
      "--ready-fd", "3",
      ...extraArgs,
    ],
    {
      stdio: ["ignore", logFd, logFd, "pipe"],
      env: {
        ASAN_OPTIONS: "detect_leaks=1:abort_on_error=0:exitcode=23",
        UBSAN_OPTIONS: "print_stacktrace=1:halt_on_error=1",
        ...process.env,
      },
    },
  );
  closeSync(logFd);
  const log = () => {
    try {
      return readFileSync(logPath, "utf8").slice(-20000);
    } catch {
      return "";
    }
  };
  const exited = new Promise<number | string>((r) => child.on("exit", (code, sig) => r(code ?? sig ?? -1)));
  let url: string;
  try {
    url = await waitReady(child, log, 60_000);
  } catch (e) {
    child.kill("SIGKILL");
    throw e;
  }
  const key = readFileSync(join(stateDir, "admin.key"), "utf8").trim();
  const client = new BrigClient({ url, apiKey: key });
  return {
    url,
    key,
    stateDir,
    client,
    operatorKey: readFileSync(join(stateDir, "operator.key"), "utf8").trim(),
    log,
    async stop() {
      const left: string[] = [];
      try {
        const r = await client.json<{ sandboxes: { id: string }[] }>("GET", "/v1/sandboxes");
        for (const s of r.sandboxes) {
          left.push(s.id);
          await client.json("DELETE", `/v1/sandboxes/${s.id}`).catch(() => undefined);
        }
      } finally {
        client.close();
        child.kill("SIGTERM");
        let timer: NodeJS.Timeout | undefined;
        const rc = await Promise.race([exited, new Promise((r) => (timer = setTimeout(() => r("timeout"), 60_000)))]);
        clearTimeout(timer);
        if (rc === "timeout") child.kill("SIGKILL");
        if (rc !== 0) throw new Error(`brigd stopped with ${rc}:\n${log()}`);
        const leaks = leftovers(stateDir);
        if (leaks.length) throw new Error(`brigd left behind: ${leaks.join(", ")}`);
        rmSync(stateDir, { recursive: true, force: true });
      }
      return left;
    },
  };
}

/**
 * For a test suite: a brigd started before its tests and stopped after them,
 * failing the suite if a test left a sandbox behind.  With `sandbox`, also
 * one sandbox of that template for the suite's tests.  `defer(fn)` registers
 * clean-ups (a client, a child process) that run, newest first and whatever
 * fails, before brigd stops.  Call inside `describe`, passing node:test's
 * `before` and `after`.
 */
export function useBrigd(
  before: (fn: () => Promise<void>) => void,
  after: (fn: () => Promise<void>) => void,
  options: { sandbox?: string } = {},
): { brigd: () => Brigd; sandbox: () => Sandbox; defer: (fn: () => unknown) => void } {
  let brigd: Brigd | undefined;
  let sandbox: Sandbox | undefined;
  const deferred: (() => unknown)[] = [];
  before(async () => {
    brigd = await startBrigd();
    if (options.sandbox) {
      const sb = await Sandbox.create({ template: options.sandbox, client: brigd.client });
      sandbox = sb;
      deferred.push(() => sb.kill());
    }
  });
  after(async () => {
    const errors: unknown[] = [];
    for (const fn of deferred.reverse()) await Promise.resolve().then(fn).catch((e: unknown) => errors.push(e));
    const left = await brigd?.stop();
    if (errors.length) throw errors[0];
    if (left?.length) throw new Error(`tests left sandboxes behind: ${left.join(", ")}`);
  });
  return {
    brigd: () => brigd ?? fail("brigd is not started"),
    sandbox: () => sandbox ?? fail("no sandbox for this suite"),
    defer: (fn) => void deferred.push(fn),
  };
}

function fail(msg: string): never {
  throw new Error(msg);
}
