/**
 * brig-mcp driven by the MCP SDK's own client: over stdio (every tool), and a
 * streamable-HTTP smoke test, against a real brigd.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { request } from "node:http";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Sandbox } from "@brig/sdk";
import { useBrigd } from "../../testlib/brigd.js";

/** sdk/mcp/bin/brig-mcp; this file runs from sdk/.test-build/mcp/test/. */
const BIN = resolve(dirname(fileURLToPath(import.meta.url)), "../../../mcp/bin/brig-mcp");

const TOOLS = [
  "sandbox_create",
  "sandbox_delete",
  "sandbox_download",
  "sandbox_exec",
  "sandbox_fork",
  "sandbox_list",
  "sandbox_pause",
  "sandbox_resume",
  "sandbox_run",
  "sandbox_upload",
];

function text(r: unknown): string {
  const c = (r as CallToolResult).content;
  assert.equal(c.length, 1);
  assert.equal(c[0]!.type, "text");
  return (c[0] as { text: string }).text;
}

function structured<T>(r: unknown): T {
  return (r as CallToolResult).structuredContent as T;
}

interface ExecOut {
  exit_code: number;
  stdout: string;
  stderr: string;
  timed_out: boolean;
  duration_ms: number;
  reason: string | null;
}

describe("brig-mcp over stdio", () => {
  const { brigd, defer } = useBrigd(before, after);
  let client: Client;
  let transport: StdioClientTransport;
  const call = (name: string, args: Record<string, unknown> = {}) => client.callTool({ name, arguments: args });

  before(async () => {
    transport = new StdioClientTransport({
      command: BIN,
      env: { PATH: process.env.PATH!, BRIG_URL: brigd().url, BRIG_API_KEY: brigd().key },
      stderr: "inherit",
    });
    client = new Client({ name: "brig-test", version: "0" });
    defer(() => client.close());
    await client.connect(transport);
  });

  test("lists the ten tools with descriptions and schemas", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    for (const t of tools) {
      assert.ok(t.description && t.description.length > 20, `${t.name} has a description`);
      assert.equal(t.inputSchema.type, "object");
    }
    const run = tools.find((t) => t.name === "sandbox_run")!;
    assert.deepEqual(run.inputSchema.required, ["command"]);
    assert.deepEqual(Object.keys(run.inputSchema.properties ?? {}).sort(), ["command", "template", "timeout"]);
    const create = tools.find((t) => t.name === "sandbox_create")!;
    assert.deepEqual(Object.keys(create.inputSchema.properties ?? {}).sort(), ["env", "isolation", "on_idle", "tariff", "template"]);
  });

  test("sandbox_pause, sandbox_resume, sandbox_fork", async () => {
    const created = await call("sandbox_create", { template: "minimal" });
    const id = structured<{ sandbox_id: string }>(created).sandbox_id;
    const noCkpt = await call("sandbox_pause", { sandbox_id: id, memory: "checkpoint" });
    assert.ok(noCkpt.isError && text(noCkpt).includes("checkpoint"), text(noCkpt));
    const paused = await call("sandbox_pause", { sandbox_id: id });
    assert.ok(!paused.isError, text(paused));
    assert.equal(text(paused), `Sandbox ${id} is paused.`);
    const refused = await call("sandbox_exec", { sandbox_id: id, command: "true" });
    assert.ok(refused.isError && text(refused).includes("paused"), text(refused));
    const resumed = await call("sandbox_resume", { sandbox_id: id });
    assert.deepEqual(structured(resumed), { sandbox_id: id, state: "running" });
    const forked = await call("sandbox_fork", { sandbox_id: id, count: 2 });
    assert.ok(!forked.isError, text(forked));
    const kids = structured<{ sandbox_ids: string[] }>(forked).sandbox_ids;
    assert.equal(kids.length, 2);
    for (const k of kids) assert.ok(!(await call("sandbox_delete", { sandbox_id: k })).isError);
    assert.ok(!(await call("sandbox_delete", { sandbox_id: id })).isError);
  });

  test("sandbox_create takes an isolation mode, and refuses an unknown one", async () => {
    const created = await call("sandbox_create", { template: "minimal", isolation: "container" });
    assert.ok(!created.isError, text(created));
    const out = structured<{ sandbox_id: string; isolation: string }>(created);
    assert.equal(out.isolation, "container");
    assert.equal(text(created), `Created sandbox ${out.sandbox_id} (template minimal, tariff small, isolation container).`);
    assert.ok(!(await call("sandbox_delete", { sandbox_id: out.sandbox_id })).isError);
    const bad = await call("sandbox_create", { template: "minimal", isolation: "kvm" });
    assert.ok(bad.isError, text(bad));
    const paused = await call("sandbox_create", { template: "minimal", on_idle: "pause" });
    assert.ok(!paused.isError, text(paused));
    const pid = structured<{ sandbox_id: string }>(paused).sandbox_id;
    const got = await fetch(`${brigd().url}/v1/sandboxes/${pid}`, {
      headers: { Authorization: `Bearer ${brigd().key}` },
    });
    assert.equal(((await got.json()) as { on_idle: string }).on_idle, "pause");
    assert.ok(!(await call("sandbox_delete", { sandbox_id: pid })).isError);
  });

  test("create, upload, exec, download, list, delete", async () => {
    const created = await call("sandbox_create", { template: "minimal", tariff: "small", env: { FROM_CREATE: "yes" } });
    assert.ok(!created.isError, text(created));
    const id = structured<{ sandbox_id: string }>(created).sandbox_id;
    assert.match(id, /^sbx_/);
    assert.equal(text(created), `Created sandbox ${id} (template minimal, tariff small, isolation container).`);
    assert.equal(structured<ExecOut>(await call("sandbox_exec", { sandbox_id: id, command: "echo $FROM_CREATE" })).stdout, "yes\n");

    const listed = await call("sandbox_list");
    assert.deepEqual(
      structured<{ sandboxes: { sandbox_id: string }[] }>(listed).sandboxes.map((s) => s.sandbox_id),
      [id],
    );
    assert.match(text(listed), new RegExp(`${id}  template=minimal  state=running`));

    const up = await call("sandbox_upload", { sandbox_id: id, path: "/root/t.sh", content: "echo from-script\n", mode: "0755" });
    assert.ok(!up.isError, text(up));
    assert.match(text(up), /Wrote 17 bytes to \/root\/t.sh/);

    // A non-zero exit is a normal result, not a tool error.
    const ex = await call("sandbox_exec", { sandbox_id: id, command: "/root/t.sh; echo oops >&2; exit 3" });
    assert.ok(!ex.isError, text(ex));
    assert.deepEqual(
      { ...structured<ExecOut>(ex), duration_ms: 0 },
      { exit_code: 3, stdout: "from-script\n", stderr: "oops\n", timed_out: false, duration_ms: 0, reason: "exited" },
    );
    assert.equal(text(ex), "exit_code: 3\nstdout:\nfrom-script\n\nstderr:\noops\n");

    const cwd = await call("sandbox_exec", { sandbox_id: id, command: "pwd; echo $X", cwd: "/tmp", env: { X: "y" } });
    assert.equal(structured<ExecOut>(cwd).stdout, "/tmp\ny\n");

    const down = await call("sandbox_download", { sandbox_id: id, path: "/root/t.sh" });
    assert.ok(!down.isError);
    assert.equal(text(down), "echo from-script\n");

    await call("sandbox_upload", { sandbox_id: id, path: "/root/b.bin", content: "AP+A", encoding: "base64" });
    const bin = await call("sandbox_download", { sandbox_id: id, path: "/root/b.bin" });
    assert.equal(text(bin), "(binary file, 3 bytes, base64)\nAP+A");

    const dir = await call("sandbox_download", { sandbox_id: id, path: "/root" });
    assert.equal(dir.isError, true);
    assert.match(text(dir), /is a directory/);

    const missing = await call("sandbox_download", { sandbox_id: id, path: "/root/none" });
    assert.equal(missing.isError, true);
    assert.match(text(missing), /not_found/);

    const del = await call("sandbox_delete", { sandbox_id: id });
    assert.ok(!del.isError, text(del));
    assert.equal(text(await call("sandbox_list")), "No sandboxes.");

    const again = await call("sandbox_delete", { sandbox_id: id });
    assert.equal(again.isError, true);
    const gone = await call("sandbox_exec", { sandbox_id: id, command: "true" });
    assert.equal(gone.isError, true);
    assert.match(text(gone), /^brig: .*\(not_found, HTTP 404\)$/);
  });

  test("sandbox_run: one shot in the base template, nothing left", async () => {
    const r = await call("sandbox_run", { command: "python3 -c 'print(6*7)'; node -e 'console.error(1+1)'" });
    assert.ok(!r.isError, text(r));
    const out = structured<ExecOut>(r);
    assert.equal(out.exit_code, 0);
    assert.equal(out.stdout, "42\n");
    assert.equal(out.stderr, "2\n");
    assert.deepEqual(await Sandbox.list({ client: brigd().client }), []);
  });

  test("sandbox_run: a timeout, a failing command, long output", async () => {
    const slow = structured<ExecOut>(await call("sandbox_run", { command: "sleep 10", template: "minimal", timeout: 0.5 }));
    assert.equal(slow.timed_out, true);
    assert.equal(slow.exit_code, 137);
    assert.equal(slow.reason, "timeout");

    const bad = await call("sandbox_run", { command: "exit 42", template: "minimal" });
    assert.ok(!bad.isError);
    assert.equal(structured<ExecOut>(bad).exit_code, 42);

    const long = structured<ExecOut>(await call("sandbox_run", { command: "seq 1 20000", template: "minimal" }));
    assert.match(long.stdout, /^\[… \d+ characters omitted …\]\n/);
    assert.ok(long.stdout.endsWith("19999\n20000\n"));
    assert.ok(long.stdout.length < 20_100);

    const unknown = await call("sandbox_run", { command: "true", template: "no-such-template" });
    assert.equal(unknown.isError, true);
    assert.match(text(unknown), /invalid_request/);
    assert.deepEqual(await Sandbox.list({ client: brigd().client }), []);
  });

  test("a cancelled call kills the command", async () => {
    await using sb = await Sandbox.create({ template: "minimal", client: brigd().client });
    const ac = new AbortController();
    const call = client.callTool({ name: "sandbox_exec", arguments: { sandbox_id: sb.id, command: "sleep 41" } }, undefined, {
      signal: ac.signal,
    });
    for (let i = 0; i < 100 && !(await sb.exec("ps -o args | grep '[s]leep 41' || true")).stdout; i++)
      await new Promise((r) => setTimeout(r, 20));
    ac.abort();
    await assert.rejects(call);
    let left = "running";
    for (let i = 0; i < 100 && left; i++) {
      await new Promise((r) => setTimeout(r, 50));
      left = (await sb.exec("ps -o args | grep '[s]leep 41' || true")).stdout;
    }
    assert.equal(left, "", "the command of a cancelled call still runs");
  });

  test("a long command reports progress to a client that asks", async () => {
    const sb = await Sandbox.create({ template: "minimal", client: brigd().client });
    try {
      const progress: number[] = [];
      const r = await client.callTool({ name: "sandbox_exec", arguments: { sandbox_id: sb.id, command: "sleep 6; echo ok" } }, undefined, {
        onprogress: (p) => progress.push(p.progress),
        resetTimeoutOnProgress: true,
      });
      assert.equal(structured<ExecOut>(r).stdout, "ok\n");
      assert.ok(progress.length >= 1, "at least one progress notification");
    } finally {
      await sb.kill();
    }
  });
});

describe("brig-mcp lifecycle and HTTP", () => {
  const { brigd, defer } = useBrigd(before, after);
  const env = () => ({ PATH: process.env.PATH!, BRIG_URL: brigd().url, BRIG_API_KEY: brigd().key });

  test("sandboxes made with sandbox_create are deleted when the client goes away", async () => {
    const client = new Client({ name: "brig-test", version: "0" });
    const transport = new StdioClientTransport({ command: BIN, env: env(), stderr: "inherit" });
    defer(() => client.close());
    await client.connect(transport);
    const r = await client.callTool({ name: "sandbox_create", arguments: { template: "minimal" } });
    const id = structured<{ sandbox_id: string }>(r).sandbox_id;
    assert.deepEqual((await Sandbox.list({ client: brigd().client })).map((s) => s.id), [id]);
    await client.close();
    let left = [id];
    for (let i = 0; i < 100 && left.length; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = (await Sandbox.list({ client: brigd().client })).map((s) => s.id);
    }
    assert.deepEqual(left, []);
  });

  test("streamable HTTP on 127.0.0.1: list tools, run a command", async () => {
    const child = spawn(BIN, ["--http", "0"], { env: env(), stdio: ["ignore", "inherit", "pipe"] });
    defer(() => child.kill("SIGKILL"));
    try {
      let banner = "";
      const url = await new Promise<string>((resolveUrl, reject) => {
        child.stderr!.on("data", (d: Buffer) => {
          banner += d.toString();
          const m = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(banner);
          if (m) resolveUrl(m[0]);
        });
        child.on("exit", (code) => reject(new Error(`brig-mcp exited ${code}: ${banner}`)));
      });
      const client = new Client({ name: "brig-test", version: "0" });
      defer(() => client.close());
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
      const r = await client.callTool({ name: "sandbox_run", arguments: { command: "echo over http", template: "minimal" } });
      assert.equal(structured<ExecOut>(r).stdout, "over http\n");
      await client.close();

      // Another Host header (DNS rebinding) is refused.
      const status = await new Promise<number>((resolveStatus, reject) => {
        const req = request(url, {
          method: "POST",
          headers: { host: "evil.example", "content-type": "application/json", accept: "application/json, text/event-stream" },
        });
        req.on("response", (res) => {
          res.resume();
          resolveStatus(res.statusCode ?? 0);
        });
        req.on("error", reject);
        req.end(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }));
      });
      assert.equal(status, 403);
    } finally {
      child.kill("SIGTERM");
      if (child.exitCode === null) await once(child, "exit");
    }
    assert.equal(child.exitCode ?? child.signalCode, 143);
  });
});
