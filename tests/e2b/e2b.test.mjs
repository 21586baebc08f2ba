// e2b.test.mjs - the official e2b SDK (pinned in package-lock.json, unmodified) against a real
// brigd, configured only by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (docs/e2b.md).
// One brigd and a few sandboxes for the whole file, to keep `make check` short.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  ALL_TRAFFIC,
  AuthenticationError,
  CommandExitError,
  FileNotFoundError,
  FilesystemEventType,
  Sandbox,
  SandboxError,
  SandboxNotFoundError,
} from "e2b";
import { startBrigd } from "../ui/brigd.mjs";
import { conform, matrixFile } from "./matrix.mjs";

matrixFile("e2b");

let brigd;
let sbx;

before(async () => {
  brigd = await startBrigd();
  process.env.E2B_API_URL = brigd.url;
  process.env.E2B_SANDBOX_URL = brigd.url;
  process.env.E2B_API_KEY = brigd.key;
  sbx = await Sandbox.create("base", {
    metadata: { suite: "e2b", note: "a b&c=d%e" },
    envs: { FROM_CREATE: "created" },
    timeoutMs: 120_000,
  });
});

after(async () => {
  if (brigd) await brigd.stop();
});

describe("control plane", () => {
  test("create answers an id, a token and a semver envd", async () => {
    assert.match(sbx.sandboxId, /.+/);
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.templateId, "base");
    assert.equal(info.state, "running");
    assert.deepEqual(info.metadata, { suite: "e2b", note: "a b&c=d%e" });
    assert.ok(info.endAt.getTime() > Date.now());
    // brig's own view: the same sandbox, the same lifetime
    const own = await brigd.admin("GET", `/v1/sandboxes/${sbx.sandboxId}`);
    assert.equal(own.state, "running");
    conform("`Sandbox.create(template, {timeoutMs, metadata, envs})`", "supported", "`POST /v2/sandboxes`: `201`, a brig sandbox (its lifetime is `timeout`)");
    conform("`getInfo()`, `Sandbox.getInfo(id)`", "supported", "`cpuCount`, `memoryMB`, `diskSizeMB` from the tariff");
  });

  test("list filters by metadata (encoded three times)", async () => {
    const other = await Sandbox.create("base", { metadata: { suite: "other" } });
    try {
      const mine = await Sandbox.list({ query: { metadata: { note: "a b&c=d%e" } } }).nextItems();
      assert.deepEqual(
        mine.map((s) => s.sandboxId),
        [sbx.sandboxId],
      );
      const all = await Sandbox.list().nextItems();
      assert.ok(all.some((s) => s.sandboxId === other.sandboxId));
      const none = await Sandbox.list({ query: { metadata: { suite: "nobody" } } }).nextItems();
      assert.equal(none.length, 0);
      const paused = await Sandbox.list({ query: { state: ["paused"] } }).nextItems();
      assert.equal(paused.length, 0);
      conform("`Sandbox.list({query: {metadata, state}})`", "supported", "metadata filters; `state`: `running`, `paused` or both");
    } finally {
      assert.equal(await other.kill(), true);
    }
  });

  test("list pages with limit and nextToken", async () => {
    const extra = await Sandbox.create("base");
    try {
      const pager = Sandbox.list({ limit: 1 });
      const seen = [];
      while (pager.hasNext) seen.push(...(await pager.nextItems()));
      assert.ok(seen.length >= 2);
      assert.equal(new Set(seen.map((s) => s.sandboxId)).size, seen.length);
      conform("`Sandbox.list({limit})`, `nextItems()`", "supported", "pages by `nextToken` / `X-Next-Token`");
    } finally {
      await extra.kill();
    }
  });

  test("setTimeout moves the end; connect reaches the same sandbox", async () => {
    await sbx.setTimeout(600_000);
    const info = await sbx.getInfo();
    assert.ok(info.endAt.getTime() > Date.now() + 500_000);
    const again = await Sandbox.connect(sbx.sandboxId);
    const r = await again.commands.run("echo connected");
    assert.equal(r.stdout, "connected\n");
    conform("`setTimeout(ms)`", "supported", "`204`: the sandbox now ends at now + ms (at most `lifetime_max` after its start)");
    conform("`Sandbox.connect(id)`", "supported", "`200` and the sandbox's access token");
  });

  test("pause freezes it; connect resumes it where it stopped", async () => {
    const s = await Sandbox.create("base", { timeoutMs: 120_000 });
    try {
      await s.files.write("/tmp/before", "kept");
      assert.equal(await s.pause(), true);
      assert.equal(await s.pause(), false); // paused already
      assert.equal((await s.getInfo()).state, "paused");
      const listed = await Sandbox.list({ query: { state: ["paused"] } }).nextItems();
      assert.deepEqual(
        listed.map((x) => x.sandboxId),
        [s.sandboxId],
      );
      // envd of a paused sandbox answers as E2B's does: the SDK says it is not running
      await assert.rejects(s.commands.run("true"), (e) => e instanceof SandboxNotFoundError || /paused/.test(e.message));
      await assert.rejects(s.pause({ keepMemory: false }), (e) => /memory/.test(e.message));
      const back = await Sandbox.connect(s.sandboxId);
      assert.equal((await back.getInfo()).state, "running");
      assert.equal(await back.files.read("/tmp/before"), "kept");
      assert.equal((await back.commands.run("echo resumed")).stdout, "resumed\n");
      const own = await brigd.admin("GET", `/v1/sandboxes/${s.sandboxId}`);
      assert.equal(own.state, "running");
      conform("`pause()`, `Sandbox.pause(id)`", "supported", "`204` (`true`); `409` when paused already (`false`); its memory stays resident, `keepMemory: false` is refused (`400`)");
      conform("`Sandbox.connect(id)` of a paused sandbox", "supported", "`201`: resumed where it stopped; envd calls while paused fail as for a sandbox not running");
    } finally {
      await s.kill();
    }
  });

  test("a wrong API key is the SDK's AuthenticationError", async () => {
    await assert.rejects(Sandbox.create("base", { apiKey: "brig_wrong" }), AuthenticationError);
    await assert.rejects(Sandbox.list({ apiKey: "brig_wrong" }).nextItems(), AuthenticationError);
    conform("a wrong `apiKey`", "supported", "`401`: `AuthenticationError`");
  });

  test("a missing sandbox is SandboxNotFoundError; kill says false", async () => {
    await assert.rejects(Sandbox.connect("sb_nope"), SandboxNotFoundError);
    await assert.rejects(Sandbox.getInfo("sb_nope"), SandboxNotFoundError);
    assert.equal(await Sandbox.kill("sb_nope"), false);
    conform("`kill()`, `Sandbox.kill(id)` of a missing sandbox", "supported", "`false`; `connect`/`getInfo`: `SandboxNotFoundError`");
  });

  test("allowInternetAccess: false and network.denyOut: [ALL_TRAFFIC] give no egress", async () => {
    // That it reaches nothing is tests/integration/test_network.py's (test_e2e_e2b_*).
    const shut = await Sandbox.create("base", { allowInternetAccess: false });
    const denied = await Sandbox.create("base", { network: { denyOut: [ALL_TRAFFIC] } });
    try {
      for (const s of [shut, denied]) {
        assert.equal((await s.getInfo()).allowInternetAccess, false);
        assert.equal((await brigd.admin("GET", `/v1/sandboxes/${s.sandboxId}`)).egress, "none");
      }
      assert.equal((await sbx.getInfo()).allowInternetAccess, true);
      // brig's own fork of it has no egress either
      const forked = await brigd.admin("POST", `/v1/sandboxes/${shut.sandboxId}/fork`, { count: 1 });
      assert.equal(forked.sandboxes.length, 1);
      assert.equal(forked.sandboxes[0].egress, "none");
      await brigd.admin("DELETE", `/v1/sandboxes/${forked.sandboxes[0].id}`);
      conform("`Sandbox.create({allowInternetAccess: false})`", "supported", "no egress at all for this sandbox (`\"egress\": \"none\"` in brig's view), whatever its project's policy says, after a policy change or a restart too");
      conform("`Sandbox.create({network: {denyOut: [ALL_TRAFFIC]}})`", "supported", "the same as `allowInternetAccess: false`");
      await assert.rejects(
        Sandbox.create("base", { network: { allowOut: ["1.1.1.1"], denyOut: [ALL_TRAFFIC] } }),
        (e) => e instanceof SandboxError && /network\.allowOut/.test(e.message),
      );
      await assert.rejects(
        Sandbox.create("base", { network: { denyOut: ["10.0.0.0/8"] } }),
        (e) => e instanceof SandboxError && /network\.denyOut/.test(e.message),
      );
      await assert.rejects(
        Sandbox.create("base", { network: { maskRequestHost: "x.test" } }),
        (e) => e instanceof SandboxError && /network\.maskRequestHost/.test(e.message),
      );
      conform("`Sandbox.create({network: {allowOut, denyOut: [cidr], maskRequestHost, allowPublicTraffic, egressProxy, rules}})`", "unsupported", "`400` naming the option: a sandbox's own allowlist or denylist does not exist; its project's egress policy decides");
      await assert.rejects(shut.updateNetwork({ allowInternetAccess: true }), (e) => /not supported/.test(e.message));
      conform("`updateNetwork()`", "unsupported", "`501` naming the route");
    } finally {
      await shut.kill();
      await denied.kill();
    }
  });

  test("options brig does not have fail loudly", async () => {
    await assert.rejects(
      Sandbox.create("base", { lifecycle: { onTimeout: "pause" } }),
      (e) => e instanceof SandboxError && /autoPause|pause/.test(e.message),
    );
    conform("`Sandbox.create({lifecycle: {onTimeout: \"pause\"}})`", "unsupported", "`400` naming `autoPause`");
    await assert.rejects(Sandbox.create("no-such-template"), SandboxError);
    await assert.rejects(Sandbox.getMetrics(sbx.sandboxId), (e) => /not supported/.test(e.message));
    conform("`Sandbox.getMetrics(id)`", "unsupported", "`501` naming the route");
    for (const [field, value] of [["network.allowOut", { allowOut: ["1.1.1.1"] }], ["mcp", { x: {} }], ["volumeMounts", [{ name: "v", path: "/v" }]], ["iam", { tokens: { t: {} } }]]) {
      const r = await fetch(`${brigd.url}/v2/sandboxes`, {
        method: "POST",
        headers: { "X-API-KEY": brigd.key, "Content-Type": "application/json" },
        body: JSON.stringify({ templateID: "base", [field.split(".")[0]]: value }),
      });
      assert.equal(r.status, 400);
      assert.match((await r.json()).message, new RegExp(field.replace(".", "\\.")));
    }
    conform("`Sandbox.create({mcp, volumeMounts, iam})`", "unsupported", "`400` naming the option");
  });
});

describe("commands", () => {
  test("run: output, envs, cwd, user", async () => {
    const r = await sbx.commands.run("echo hi; echo err >&2; echo $FROM_CREATE $MINE; pwd; whoami", {
      envs: { MINE: "mine" },
      cwd: "/tmp",
    });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, "hi\ncreated mine\n/tmp\nuser\n");
    assert.equal(r.stderr, "err\n");
    const root = await sbx.commands.run("whoami; echo $HOME", { user: "root" });
    assert.equal(root.stdout, "root\n/root\n");
    const home = await sbx.commands.run("pwd");
    assert.equal(home.stdout, "/home/user\n");
    conform("`commands.run(cmd, {envs, cwd, user})`", "supported", "as `user` (home `/home/user`) unless `user` says; the sandbox's `envVars`, then `envs`");
  });

  test("a nonzero exit is CommandExitError with the output", async () => {
    await assert.rejects(sbx.commands.run("echo out; echo bad >&2; exit 3"), (e) => {
      assert.ok(e instanceof CommandExitError);
      assert.equal(e.exitCode, 3);
      assert.equal(e.stdout, "out\n");
      assert.equal(e.stderr, "bad\n");
      return true;
    });
    conform("`commands.run` of a failing command", "supported", "`CommandExitError` with `exitCode`, `stdout`, `stderr`");
  });

  test("a missing cwd fails", async () => {
    await assert.rejects(sbx.commands.run("true", { cwd: "/no/such/dir" }), SandboxError);
  });

  test("streaming callbacks see output as it comes", async () => {
    const seen = [];
    const r = await sbx.commands.run("for i in 1 2 3; do echo $i; done", {
      onStdout: (d) => seen.push(d),
    });
    assert.equal(seen.join(""), "1\n2\n3\n");
    assert.equal(r.stdout, "1\n2\n3\n");
    conform("`commands.run(cmd, {onStdout, onStderr})`", "supported", "output as it comes");
  });

  test("the stream's frames: start, data, keepalives in silence, end, end of stream", async () => {
    const r = await fetch(`${brigd.url}/process.Process/Start`, {
      method: "POST",
      headers: {
        "Content-Type": "application/connect+json",
        "Connect-Protocol-Version": "1",
        "Keepalive-Ping-Interval": "1",
        "E2b-Sandbox-Id": sbx.sandboxId,
        "X-Access-Token": sbx.envdAccessToken,
      },
      body: envelope({ process: { cmd: "/bin/bash", args: ["-c", "sleep 2.5; echo done; exit 4"] } }),
    });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "application/connect+json");
    const buf = Buffer.from(await r.arrayBuffer());
    const frames = [];
    for (let off = 0; off < buf.length; ) {
      const len = buf.readUInt32BE(off + 1);
      frames.push({ flags: buf[off], msg: JSON.parse(buf.subarray(off + 5, off + 5 + len).toString()) });
      off += 5 + len;
    }
    const kinds = frames.map((f) => (f.flags === 2 ? "eos" : Object.keys(f.msg.event)[0]));
    assert.equal(kinds[0], "start");
    assert.ok(kinds.filter((k) => k === "keepalive").length >= 1, kinds.join(","));
    assert.deepEqual(kinds.slice(-3), ["data", "end", "eos"]);
    assert.equal(Buffer.from(frames.at(-3).msg.event.data.stdout, "base64").toString(), "done\n");
    assert.deepEqual(frames.at(-2).msg.event.end, { exited: true, status: "exit status 4", exitCode: 4, error: "exit status 4" });
    assert.deepEqual(frames.at(-1).msg, {});
  });

  test("a timeout kills the whole process group", async () => {
    const marker = `/tmp/grandchild-${Date.now()}`;
    await assert.rejects(
      sbx.commands.run(`(sleep 30; touch ${marker}) & sleep 30`, { timeoutMs: 1500 }),
    );
    // The SDK gives up at its deadline and the agent kills at the same one (Connect-Timeout-Ms),
    // counted from the request's arrival: the kill may come a moment after the SDK's error.
    // Those sleeps would live 30 s: 10 s bounds the wait without deciding it.
    const left = async () => (await sbx.commands.run("ps -eo args | grep -c '[s]leep 30' || true")).stdout.trim();
    for (const end = Date.now() + 10_000; (await left()) !== "0"; )
      if (Date.now() > end) assert.fail(`the command's sleeps outlived its timeout: ${await left()}`);
    conform("`commands.run(cmd, {timeoutMs})`", "supported", "the whole process group is killed at the timeout");
  });

  test("background: list, connect, stdin, kill", async () => {
    const h = await sbx.commands.run("cat", { background: true, stdin: true });
    assert.ok(h.pid > 0);
    const procs = await sbx.commands.list();
    assert.ok(procs.some((p) => p.pid === h.pid && p.cmd === "/bin/bash"));
    await sbx.commands.sendStdin(h.pid, "typed\n");
    const seen = [];
    const again = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) });
    await sbx.commands.closeStdin(h.pid);
    const done = await again.wait();
    assert.equal(done.exitCode, 0);
    assert.equal(done.stdout, "typed\n");

    const sleeper = await sbx.commands.run("sleep 60", { background: true });
    assert.equal(await sleeper.kill(), true);
    await assert.rejects(sleeper.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1);
    assert.equal(await sbx.commands.kill(sleeper.pid), false);
    conform("`commands.run(cmd, {background: true, stdin: true})`, `sendStdin`, `closeStdin`, `commands.connect(pid)`, `wait()`", "supported", "a background brig process, followed");
    conform("`commands.list()`, `commands.kill(pid)`, `handle.kill()`", "supported", "`list`: running commands' `cmd` and `args` (not their `envs`); killed: `exitCode` -1");
    const tag = await fetch(`${brigd.url}/process.Process/Connect`, {
      method: "POST",
      headers: { "Content-Type": "application/connect+json", "E2b-Sandbox-Id": sbx.sandboxId, "X-Access-Token": sbx.envdAccessToken ?? "" },
      body: envelope({ process: { tag: "web" } }),
    });
    assert.match(Buffer.from(await tag.arrayBuffer()).toString(), /invalid_argument.*tags are not supported/);
    conform("process `tag` selectors", "unsupported", "`invalid_argument`: name processes by pid");
  });
});

describe("secrets", () => {
  test("a brig sandbox with secrets: the SDK connects to it, and output and files are redacted", async () => {
    const secret = "s3cr3t-e2b-value-7781";
    const own = await brigd.admin("POST", "/v1/sandboxes", { template: "base", secrets: { TOKEN: secret } });
    const s = await Sandbox.connect(own.id);
    try {
      const r = await s.commands.run("echo $TOKEN; echo $TOKEN >&2; echo $TOKEN > /tmp/t.txt");
      assert.equal(r.stdout, "[REDACTED:TOKEN]\n");
      assert.equal(r.stderr, "[REDACTED:TOKEN]\n");
      const streamed = [];
      await s.commands.run("echo $TOKEN", { background: true, onStdout: (d) => streamed.push(d) }).then((h) => h.wait());
      assert.ok(!streamed.join("").includes(secret));
      const f = await s.files.read("/tmp/t.txt");
      assert.ok(!f.includes(secret), f);
      assert.equal(f.length, secret.length + 1); // a mask of its own length
      conform("`Sandbox.connect(id)` of a sandbox made by brig's own API; its secrets", "supported", "commands' output and downloads redacted as brig's own exec and downloads are");
    } finally {
      await s.kill();
    }
  });
});

describe("pty", () => {
  test("create, input, resize, exit; kill", async () => {
    let out = "";
    let want = null;
    const dec = new TextDecoder();
    const check = () => {
      if (want && out.includes(want.text)) {
        const w = want;
        want = null;
        w.resolve();
      }
    };
    const waitFor = (text) => new Promise((resolve) => ((want = { text, resolve }), check()));
    const enc = new TextEncoder();
    const term = await sbx.pty.create({
      cols: 80,
      rows: 24,
      timeoutMs: 60_000,
      onData: (d) => ((out += dec.decode(d, { stream: true })), check()),
    });
    await sbx.pty.sendInput(term.pid, enc.encode("stty size; tty; echo $TERM\n"));
    await waitFor("xterm-256color");
    assert.match(out, /24 80/);
    assert.match(out, /\/dev\/pts\//);
    await sbx.pty.resize(term.pid, { cols: 100, rows: 30 });
    await sbx.pty.sendInput(term.pid, enc.encode("stty size\n"));
    await waitFor("30 100");
    await sbx.pty.sendInput(term.pid, enc.encode("exit 0\n"));
    const done = await term.wait();
    assert.equal(done.exitCode, 0);

    const other = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} });
    assert.equal(await sbx.pty.kill(other.pid), true);
    await assert.rejects(other.wait(), CommandExitError);
    conform("`pty.create({cols, rows, onData})`, `pty.sendInput`, `pty.resize`, `pty.kill`", "supported", "a brig pseudo-terminal (`pty_max` per sandbox)");
  });
});

describe("files", () => {
  test("write, read, list, exists, rename, remove", async () => {
    const info = await sbx.files.write("/tmp/e2b/a.txt", "hello\n");
    assert.equal(info.path, "/tmp/e2b/a.txt");
    assert.equal(await sbx.files.read("/tmp/e2b/a.txt"), "hello\n");
    const cat = await sbx.commands.run("cat /tmp/e2b/a.txt");
    assert.equal(cat.stdout, "hello\n");
    // the user's file, as envd's would be: the user's commands may change it
    await sbx.commands.run("echo more >> /tmp/e2b/a.txt");
    assert.equal(await sbx.files.read("/tmp/e2b/a.txt"), "hello\nmore\n");
    await sbx.files.write("/tmp/e2b/root.txt", "r", { user: "root" });
    const owners = await sbx.commands.run("stat -c %U /tmp/e2b/a.txt /tmp/e2b/root.txt");
    assert.equal(owners.stdout, "user\nroot\n");
    await sbx.files.remove("/tmp/e2b/root.txt");
    assert.equal(await sbx.files.exists("/tmp/e2b/a.txt"), true);
    assert.equal(await sbx.files.exists("/tmp/e2b/none"), false);
    assert.equal(await sbx.files.makeDir("/tmp/e2b/sub/deeper"), true);
    assert.equal(await sbx.files.makeDir("/tmp/e2b/sub/deeper"), false);
    await sbx.commands.run("touch /tmp/e2b/sub/deeper/mine"); // the user's directory
    await sbx.files.remove("/tmp/e2b/sub/deeper/mine");
    const list = await sbx.files.list("/tmp/e2b");
    assert.deepEqual(list.map((e) => [e.name, e.type]), [["a.txt", "file"], ["sub", "dir"]]);
    const deep = await sbx.files.list("/tmp/e2b", { depth: 3 });
    assert.ok(deep.some((e) => e.path === "/tmp/e2b/sub/deeper"));
    const moved = await sbx.files.rename("/tmp/e2b/a.txt", "/tmp/e2b/b.txt");
    assert.equal(moved.path, "/tmp/e2b/b.txt");
    await sbx.files.remove("/tmp/e2b/b.txt");
    assert.equal(await sbx.files.exists("/tmp/e2b/b.txt"), false);
    await sbx.files.remove("/tmp/e2b");
    assert.equal(await sbx.files.exists("/tmp/e2b"), false);
    conform("`files.write(path, data)`, `files.read(path)`", "supported", "what is written belongs to the calling user, as envd's would");
    conform("`files.list(path, {depth})`, `exists`, `makeDir`, `rename`, `remove`", "supported", "entries' `owner` and `group` are empty");
  });

  test("several files at once; relative paths are the user's home's", async () => {
    const out = await sbx.files.write([
      { path: "/tmp/multi/one", data: "1" },
      { path: "rel.txt", data: "2" },
    ]);
    assert.deepEqual(out.map((e) => e.path), ["/tmp/multi/one", "/home/user/rel.txt"]);
    const r = await sbx.commands.run("cat /tmp/multi/one /home/user/rel.txt");
    assert.equal(r.stdout, "12");
    conform("`files.write([{path, data}, …])`, relative paths", "supported", "one multipart upload; relative paths are the user's home's");
  });

  test("5 MiB of binary both ways", async () => {
    const big = new Uint8Array(5 << 20);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff;
    await sbx.files.write("/tmp/big.bin", big.buffer);
    const back = await sbx.files.read("/tmp/big.bin", { format: "bytes" });
    assert.equal(back.length, big.length);
    assert.ok(Buffer.from(back).equals(Buffer.from(big)));
    conform("`files.read(path, {format: \"bytes\"})` of 5 MiB", "supported", "streamed both ways");
    const streamed = await sbx.files.write("/tmp/streamed.txt", new Blob(["via a stream"]).stream());
    assert.equal(streamed[0]?.path ?? streamed.path, "/tmp/streamed.txt");
    assert.equal(await sbx.files.read("/tmp/streamed.txt"), "via a stream");
    conform("`files.write(path, stream)` (octet-stream)", "supported", "a raw body, streamed");
    await sbx.files.write("/tmp/z.txt", "zipped ".repeat(10_000), { gzip: true });
    assert.equal(await sbx.files.read("/tmp/z.txt", { gzip: true }), "zipped ".repeat(10_000));
    const zbig = await sbx.files.write("/tmp/zbig.bin", big.buffer, { gzip: true });
    assert.equal(zbig[0]?.path ?? zbig.path, "/tmp/zbig.bin");
    assert.ok(Buffer.from(await sbx.files.read("/tmp/zbig.bin", { format: "bytes", gzip: true })).equals(Buffer.from(big)));
    conform("`files.write(path, data, {gzip: true})`, `files.read(path, {gzip: true})`", "supported", "uploads inflated as they stream in; downloads answered uncompressed (HTTP lets a server ignore `Accept-Encoding`)");
    // a bad gzip body, another encoding, gzip on multipart: 400 naming it
    for (const [headers, body, named] of [
      [{ "Content-Encoding": "gzip", "Content-Type": "application/octet-stream" }, "not gzip", /gzip body/],
      [{ "Content-Encoding": "br", "Content-Type": "application/octet-stream" }, "x", /Content-Encoding 'br'/],
    ]) {
      const r = await fetch(`${brigd.url}/files?path=/tmp/bad.gz&username=user`, {
        method: "POST",
        headers: { ...headers, "E2b-Sandbox-Id": sbx.sandboxId, "X-Access-Token": sbx.envdAccessToken },
        body,
      });
      assert.equal(r.status, 400, await r.clone().text());
      assert.match((await r.json()).message, named);
    }
  });

  test("a missing file is FileNotFoundError", async () => {
    await assert.rejects(sbx.files.read("/tmp/none/at/all"), FileNotFoundError);
    await assert.rejects(sbx.files.list("/tmp/none/at/all"), FileNotFoundError);
    conform("a missing file", "supported", "`FileNotFoundError`");
  });

  test("watchDir: creates, writes, chmods, removes, recursive", async () => {
    await sbx.files.makeDir("/tmp/watched/sub");
    const seen = [];
    const has = (name, type) => seen.some((e) => e.name === name && e.type === type);
    // Each change is seen within a poll (0.2 s) or two; 10 s is a bound, not a pace.
    const until = async (name, type) => {
      for (const end = Date.now() + 10_000; !has(name, type); await new Promise((r) => setTimeout(r, 20)))
        if (Date.now() > end) assert.fail(`no ${type} of ${name}: ${JSON.stringify(seen)}`);
    };
    const handle = await sbx.files.watchDir("/tmp/watched", (e) => seen.push(e), { recursive: true });
    try {
      await sbx.files.write("/tmp/watched/a.txt", "a");
      await until("a.txt", FilesystemEventType.CREATE);
      await sbx.files.write("/tmp/watched/a.txt", "longer now");
      await until("a.txt", FilesystemEventType.WRITE);
      await sbx.commands.run("chmod 600 /tmp/watched/a.txt");
      await until("a.txt", FilesystemEventType.CHMOD);
      await sbx.files.write("/tmp/watched/sub/b.txt", "b");
      await until("sub/b.txt", FilesystemEventType.CREATE);
      await sbx.files.remove("/tmp/watched/a.txt");
      await until("a.txt", FilesystemEventType.REMOVE);
    } finally {
      await handle.stop();
    }
    const flat = await sbx.files.watchDir("/tmp/watched", (e) => seen.push(e));
    await flat.stop();
    await assert.rejects(sbx.files.watchDir("/tmp/none/at/all", () => {}), (e) => e instanceof SandboxError);
    // The polling form (E2B's Python SDK's watch_dir), as that SDK sends it: Connect unary JSON.
    const rpc = async (method, body) => {
      const r = await fetch(`${brigd.url}/filesystem.Filesystem/${method}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1", "E2b-Sandbox-Id": sbx.sandboxId, "X-Access-Token": sbx.envdAccessToken },
        body: JSON.stringify(body),
      });
      return { status: r.status, body: await r.json() };
    };
    const made = await rpc("CreateWatcher", { path: "/tmp/watched", recursive: true });
    assert.equal(made.status, 200, JSON.stringify(made.body));
    const watcherId = made.body.watcherId;
    assert.deepEqual((await rpc("GetWatcherEvents", { watcherId })).body, { events: [] });
    await sbx.files.write("/tmp/watched/sub/c.txt", "c");
    await sbx.files.remove("/tmp/watched/sub/b.txt");
    const got = await rpc("GetWatcherEvents", { watcherId });
    assert.equal(got.status, 200);
    assert.deepEqual(
      got.body.events.sort((a, b) => a.name.localeCompare(b.name)),
      [{ name: "sub/b.txt", type: "EVENT_TYPE_REMOVE" }, { name: "sub/c.txt", type: "EVENT_TYPE_CREATE" }],
    );
    assert.deepEqual((await rpc("RemoveWatcher", { watcherId })).body, {});
    const gone = await rpc("GetWatcherEvents", { watcherId });
    assert.equal(gone.status, 404);
    assert.equal(gone.body.code, "not_found");
    assert.equal((await rpc("CreateWatcher", { path: "/tmp/none/at/all" })).status, 404);
    conform("the polling form: `CreateWatcher`, `GetWatcherEvents`, `RemoveWatcher` (E2B's Python SDK's `watch_dir`)", "differs", "what changed between two `GetWatcherEvents`, found by listing then; a watcher lives in brigd's memory (at most 64 per sandbox)");
    conform("`files.watchDir(path, onEvent, {recursive})`, `handle.stop()`", "differs", "polled every 0.2 s: `create`, `write`, `chmod`, `remove`; a rename is a `remove` and a `create`, several changes of a file between two polls one event; at most 4096 entries");
  });
});

describe("the end", () => {
  test("a wrong access token is refused", async () => {
    const r = await fetch(`${brigd.url}/process.Process/List`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1", "E2b-Sandbox-Id": sbx.sandboxId, "X-Access-Token": "0".repeat(64) },
      body: "{}",
    });
    assert.equal(r.status, 401);
    assert.equal((await r.json()).code, "unauthenticated");
  });

  test("what the SDK did is in brig's audit timeline", async () => {
    const kinds = new Set();
    for (let after = 0; after !== null; ) {
      const page = await brigd.admin("GET", `/v1/sandboxes/${sbx.sandboxId}/timeline?after=${after}&limit=1000`);
      for (const e of page.events) kinds.add(e.kind);
      after = page.next_after;
    }
    for (const k of ["sandbox.created", "exec", "file.write", "file.mkdir", "file.move", "file.delete", "process.signal", "process.stdin", "sandbox.timeout"])
      assert.ok(kinds.has(k), `${k} in ${[...kinds].join(", ")}`);
  });

  test("kill ends it; after kill it is gone", async () => {
    assert.equal(await sbx.isRunning(), true);
    assert.equal(await sbx.kill(), true);
    assert.equal(await sbx.isRunning(), false);
    await assert.rejects(sbx.getInfo(), SandboxNotFoundError);
    assert.equal(await sbx.kill(), false);
    const left = await Sandbox.list({ query: { metadata: { suite: "e2b" } } }).nextItems();
    assert.equal(left.length, 0);
    conform("`isRunning()`, calls after `kill()`", "supported", "`/health` answers `502`: `false`; `getInfo`: `SandboxNotFoundError`");
  });
});

/** One Connect envelope of a JSON message. */
function envelope(msg) {
  const body = Buffer.from(JSON.stringify(msg));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}
