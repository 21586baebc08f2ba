/** Files, file-system operations and tar, against a real brigd. */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { ConflictError, InvalidRequestError, NotFoundError, type Sandbox } from "@brig/sdk";
import { useBrigd } from "../../testlib/brigd.js";

describe("files", () => {
  const { sandbox } = useBrigd(before, after, { sandbox: "minimal" });
  let sb: Sandbox;
  before(() => {
    sb = sandbox();
  });

  test("upload and download text, bytes, streams, Blobs", async () => {
    await sb.upload("/root/hello.txt", "héllo\n");
    assert.equal(await sb.downloadText("/root/hello.txt"), "héllo\n");
    assert.equal((await sb.exec("cat /root/hello.txt")).stdout, "héllo\n");

    const all = new Uint8Array(256).map((_, i) => i);
    await sb.upload("/tmp/deep/new/dir/bytes.bin", all);
    const back = await sb.download("/tmp/deep/new/dir/bytes.bin");
    assert.ok(back instanceof Uint8Array);
    assert.deepEqual(back, all);

    // A Node stream of 3 MiB, sent as it is read (chunked, waiting for the socket to drain).
    const chunk = new Uint8Array(64 * 1024).fill(0x61);
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    await sb.upload("/tmp/stream.bin", Readable.from((function* () {
      for (let i = 0; i < 48; i++) yield chunk;
    })()));
    await new Promise((r) => setImmediate(r));
    process.off("warning", onWarning);
    assert.deepEqual(warnings.map(String), [], "no listener leak while waiting for drain");
    assert.equal((await sb.exec("wc -c < /tmp/stream.bin")).stdout.trim(), String(48 * 64 * 1024));
    let streamed = 0;
    for await (const c of await sb.downloadStream("/tmp/stream.bin")) streamed += c.byteLength;
    assert.equal(streamed, 48 * 64 * 1024);

    await sb.upload("/tmp/blob.txt", new Blob(["from ", "a blob"]));
    assert.equal(await sb.downloadText("/tmp/blob.txt"), "from a blob");
    await sb.upload("/tmp/web.txt", new Blob(["web stream"]).stream());
    assert.equal(await sb.downloadText("/tmp/web.txt"), "web stream");
  });

  test("modes, stat, ls, exists", async () => {
    await sb.upload("/root/run.sh", "#!/bin/sh\necho ran\n", { mode: 0o755 });
    assert.equal((await sb.exec("/root/run.sh")).stdout, "ran\n");
    const st = await sb.stat("/root/run.sh");
    assert.deepEqual({ name: st.name, type: st.type, size: st.size, mode: st.mode }, {
      name: "run.sh",
      type: "file",
      size: 19,
      mode: "0755",
    });
    assert.ok(!Number.isNaN(Date.parse(st.mtime)));
    await sb.upload("/root/private", "x", { mode: "0600" });
    assert.equal((await sb.stat("/root/private")).mode, "0600");

    await sb.exec("mkdir -p /tmp/l && touch /tmp/l/b /tmp/l/a && mkdir /tmp/l/d && ln -s a /tmp/l/s");
    const entries = await sb.ls("/tmp/l");
    assert.deepEqual(
      entries.map((e) => [e.name, e.type]),
      [["a", "file"], ["b", "file"], ["d", "dir"], ["s", "symlink"]],
    );
    assert.equal(entries.find((e) => e.name === "s")!.target, "a");
    assert.equal(await sb.exists("/tmp/l/a"), true);
    assert.equal(await sb.exists("/tmp/l/nope"), false);
  });

  test("mkdir, move, remove", async () => {
    await sb.mkdir("/tmp/m");
    await assert.rejects(sb.mkdir("/tmp/m"), ConflictError);
    await sb.mkdir("/tmp/m/x/y/z", { parents: true, mode: 0o700 });
    assert.equal((await sb.stat("/tmp/m/x/y/z")).mode, "0700");
    await sb.upload("/tmp/m/x/f", "f");
    await sb.move("/tmp/m/x/f", "/tmp/m/g");
    assert.equal(await sb.downloadText("/tmp/m/g"), "f");
    assert.equal(await sb.exists("/tmp/m/x/f"), false);
    await assert.rejects(sb.remove("/tmp/m"), ConflictError);
    await sb.remove("/tmp/m/g");
    await sb.remove("/tmp/m", { recursive: true });
    assert.equal(await sb.exists("/tmp/m"), false);
  });

  test("file errors are typed", async () => {
    await assert.rejects(sb.download("/no/such/file"), NotFoundError);
    await assert.rejects(sb.downloadText("relative/path"), InvalidRequestError);
    await assert.rejects(sb.upload("relative", "x"), InvalidRequestError);
    await assert.rejects(sb.stat("/no/such"), NotFoundError);
    await assert.rejects(sb.ls("/no/such"), NotFoundError);
    await assert.rejects(sb.move("/no/such", "/tmp/x"), NotFoundError);
  });

  test("tar: download a tree and upload it elsewhere", async () => {
    await sb.exec("mkdir -p /tmp/t/sub && echo one > /tmp/t/one && echo two > /tmp/t/sub/two");
    const tar = await sb.downloadTar("/tmp/t");
    assert.ok(tar.byteLength >= 1024);
    await sb.uploadTar("/tmp/copy", tar);
    assert.equal(await sb.downloadText("/tmp/copy/sub/two"), "two\n");
    assert.equal(await sb.downloadText("/tmp/copy/one"), "one\n");
  });
});
