/**
 * Calls that stay silent for longer than the SDK's idle-connection timeout
 * (30 s) must not be cut off: a buffered exec and a process wait of 35 s.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { useBrigd } from "../../testlib/brigd.js";

describe("long calls", { concurrency: true }, () => {
  const { sandbox } = useBrigd(before, after, { sandbox: "minimal" });

  test("a buffered exec silent for 35 s", async () => {
    const r = await sandbox().exec("sleep 35; echo done", { timeoutMs: 60_000 });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, "done\n");
  });

  test("a streamed exec silent for 35 s", async () => {
    let got = "";
    const r = await sandbox().exec("echo a; sleep 35; echo b", { timeoutMs: 60_000, onStdout: (d) => (got += d) });
    assert.equal(r.exitCode, 0);
    assert.equal(got, "a\nb\n");
  });

  test("waiting 35 s for a background process", async () => {
    const p = await sandbox().exec("sleep 35; exit 3", { background: true });
    assert.equal((await p.wait()).exitCode, 3);
  });
});
