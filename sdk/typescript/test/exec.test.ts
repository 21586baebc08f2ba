/** Commands: buffered, streamed, aborted, and background processes, against a real brigd. */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { InvalidRequestError, NotFoundError, Process, Sandbox, TimeoutError, type ProcessEvent } from "@brig/sdk";
import { useBrigd } from "../../testlib/brigd.js";

describe("exec", () => {
  const { brigd, sandbox } = useBrigd(before, after, { sandbox: "minimal" });
  let sb: Sandbox;
  before(() => {
    sb = sandbox();
  });

  test("a non-zero exit is a result with both streams", async () => {
    const r = await sb.exec("echo out; echo err >&2; exit 3");
    assert.equal(r.exitCode, 3);
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");
    assert.equal(r.timedOut, false);
    assert.equal(r.signal, null);
    assert.equal(r.stdoutTruncated, false);
    assert.equal(typeof r.durationMs, "number");
    assert.equal((await sb.exec("no-such-program")).exitCode, 127);
  });

  test("argv, cwd, env, user, stdin", async () => {
    assert.equal((await sb.exec(["echo", "a b", "$HOME"])).stdout, "a b $HOME\n");
    assert.equal((await sb.exec("pwd", { cwd: "/tmp" })).stdout, "/tmp\n");
    assert.equal((await sb.exec("echo $A-$B", { env: { A: "1", B: "two" } })).stdout, "1-two\n");
    assert.equal((await sb.exec("id -u", { user: "user" })).stdout, "1000\n");
    assert.equal((await sb.exec("cat", { stdin: "from stdin" })).stdout, "from stdin");
    const bytes = new Uint8Array([0, 1, 2, 255]);
    assert.equal((await sb.exec("od -An -tu1 | tr -s ' '", { stdin: bytes })).stdout.trim(), "0 1 2 255");
  });

  test("a timeout kills the command and is reported, not thrown", async () => {
    const r = await sb.exec("echo before; sleep 30", { timeoutMs: 300 });
    assert.equal(r.timedOut, true);
    assert.equal(r.exitCode, 137);
    assert.equal(r.stdout, "before\n");
    assert.ok(r.durationMs < 10_000, `took ${r.durationMs} ms`);
  });

  test("killed by a signal", async () => {
    const r = await sb.exec("kill -TERM $$");
    assert.equal(r.signal, 15);
    assert.equal(r.exitCode, 143);
    assert.equal(r.reason, "signal");
  });

  test("output that is not UTF-8 is decoded with replacement characters", async () => {
    const r = await sb.exec("printf 'a\\377b'");
    assert.equal(r.stdout, "a\ufffdb");
    const streamed = await sb.exec("printf 'a\\377b'", { onStdout: () => {} });
    assert.equal(streamed.stdout, "a\ufffdb");
  });

  test("errors before the command starts are thrown", async () => {
    await assert.rejects(sb.exec("true", { cwd: "/no/such/dir" }), InvalidRequestError);
    await assert.rejects(sb.exec("true", { cwd: "relative" }), InvalidRequestError);
    await assert.rejects(sb.exec("true", { cwd: "/no/such/dir", onStdout: () => {} }), InvalidRequestError);
    await assert.rejects(
      new Sandbox(brigd().client, { ...sb.info, id: "sbx_" + "b".repeat(26) }).exec("true"),
      NotFoundError,
    );
  });

  test("streaming: chunks arrive while the command runs, in order", async () => {
    const seen: { stream: string; data: string; at: number }[] = [];
    const start = Date.now();
    const r = await sb.exec("for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.3; done; exit 5", {
      onStdout: (data) => seen.push({ stream: "stdout", data, at: Date.now() - start }),
      onStderr: (data) => seen.push({ stream: "stderr", data, at: Date.now() - start }),
    });
    assert.equal(r.exitCode, 5);
    assert.equal(r.stdout, "out1\nout2\nout3\n");
    assert.equal(r.stderr, "err1\nerr2\nerr3\n");
    const out = seen.filter((s) => s.stream === "stdout");
    assert.equal(out.map((s) => s.data).join(""), r.stdout);
    assert.equal(seen.filter((s) => s.stream === "stderr").map((s) => s.data).join(""), r.stderr);
    // The first line came long before the command ended (≥ 0.9 s in).
    assert.ok(out[0]!.at < r.durationMs - 400, `first chunk at ${out[0]!.at} ms of ${r.durationMs} ms`);
  });

  test("streaming a timeout", async () => {
    const r = await sb.exec("echo x; sleep 30", { timeoutMs: 300, onStdout: () => {} });
    assert.equal(r.timedOut, true);
    assert.equal(r.exitCode, 137);
    assert.equal(r.stdout, "x\n");
  });

  test("aborting a streamed command kills it", async () => {
    const ac = new AbortController();
    const run = sb.exec("sleep 31 & echo started; wait", {
      signal: ac.signal,
      onStdout: () => ac.abort(),
    });
    await assert.rejects(run, { name: "AbortError" });
    // brigd kills a foreground command whose client went away.
    let left = "";
    for (let i = 0; i < 50; i++) {
      left = (await sb.exec(`ps -o args | grep '[s]leep 31' || true`)).stdout;
      if (!left) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(left, "", "the aborted command still runs");
  });

  test("a throwing callback ends the stream and kills the command", async () => {
    await assert.rejects(
      sb.exec("sleep 32 & echo go; wait", {
        onStdout: () => {
          throw new Error("callback failed");
        },
      }),
      /callback failed/,
    );
    let left = "";
    for (let i = 0; i < 50; i++) {
      left = (await sb.exec(`ps -o args | grep '[s]leep 32' || true`)).stdout;
      if (!left) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(left, "");
  });
});

describe("background processes", () => {
  const { sandbox } = useBrigd(before, after, { sandbox: "minimal" });
  let sb: Sandbox;
  before(() => {
    sb = sandbox();
  });

  test("start, follow the output to the exit, wait", async () => {
    const p = await sb.exec("for i in 1 2 3; do echo line$i; echo e$i >&2; sleep 0.1; done; exit 4", {
      background: true,
    });
    assert.ok(p instanceof Process);
    assert.ok(p.pid > 0);
    assert.equal(p.info.background, true);
    const events: ProcessEvent[] = [];
    for await (const ev of p) events.push(ev);
    const text = (t: string) =>
      events
        .filter((e) => e.type === t)
        .map((e) => (e as { data: string }).data)
        .join("");
    assert.equal(text("stdout"), "line1\nline2\nline3\n");
    assert.equal(text("stderr"), "e1\ne2\ne3\n");
    const last = events.at(-1)!;
    assert.equal(last.type, "exit");
    assert.equal(last.type === "exit" && last.exitCode, 4);
    assert.equal(last.type === "exit" && last.reason, "exited");

    const info = await p.wait();
    assert.equal(info.running, false);
    assert.equal(info.exitCode, 4);
    assert.equal(info.timedOut, false);
    assert.equal(info.reason, "exited");
    assert.ok(info.endedAt);
    assert.ok((await sb.processes()).some((q) => q.pid === p.pid));
    assert.equal((await p.outputText()).stdout, "line1\nline2\nline3\n");
    const again = await sb.getProcess(p.pid);
    assert.equal(again.info.exitCode, 4);
  });

  test("stdin: send, close, and the process reads EOF", async () => {
    const p = await sb.exec("cat; echo done", { background: true });
    assert.equal(await p.sendStdin("hello "), 6);
    assert.equal(await p.sendStdin(new Uint8Array([0x77, 0x6f, 0x72, 0x6c, 0x64, 0x0a])), 6);
    await p.closeStdin();
    const info = await p.wait({ timeoutMs: 10_000 });
    assert.equal(info.exitCode, 0);
    assert.equal((await p.outputText()).stdout, "hello world\ndone\n");
  });

  test("wait with a timeout throws TimeoutError; kill ends it", async () => {
    const p = await sb.exec("sleep 60", { background: true });
    assert.match((await sb.exec("ps -o args | grep '[s]leep 60'")).stdout, /sleep 60/);
    const t0 = Date.now();
    await assert.rejects(p.wait({ timeoutMs: 300 }), TimeoutError);
    assert.ok(Date.now() - t0 < 5000);
    assert.equal((await p.refresh()).running, true);
    await p.kill();
    const info = await p.wait({ timeoutMs: 10_000 });
    assert.equal(info.running, false);
    assert.equal(info.signal, 9);
    assert.equal(info.exitCode, 137);
    assert.equal((await sb.exec("ps -o args | grep '[s]leep 60'")).stdout, "");
  });

  test("kill with another signal; a snapshot of a running process", async () => {
    const p = await sb.exec("echo ready; trap 'echo got TERM; exit 7' TERM; while true; do sleep 0.1; done", {
      background: true,
    });
    for (let i = 0; i < 50 && !(await p.outputText()).stdout.includes("ready"); i++)
      await new Promise((r) => setTimeout(r, 50));
    const snap: ProcessEvent[] = [];
    for await (const ev of p.output({ follow: false })) snap.push(ev);
    assert.deepEqual(snap, [{ type: "stdout", data: "ready\n" }]);
    await p.kill("TERM");
    const info = await p.wait({ timeoutMs: 10_000 });
    assert.equal(info.exitCode, 7);
    assert.match((await p.outputText()).stdout, /got TERM/);
  });

  test("a background command with a timeout, and a missing process", async () => {
    const p = await sb.exec("sleep 30", { background: true, timeoutMs: 200 });
    const info = await p.wait({ timeoutMs: 10_000 });
    assert.equal(info.timedOut, true);
    assert.equal(info.reason, "timeout");
    await assert.rejects(sb.getProcess(999_999), NotFoundError);
    await assert.rejects(sb.exec("true", { background: true, onStdout: () => {} }), TypeError);
  });
});
