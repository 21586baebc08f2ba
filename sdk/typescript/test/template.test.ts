/** Templates declared by users through the SDK, against a real brigd (docs/templates.md). */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { BuildFailedError, NotFoundError, Sandbox, Template } from "@brig/sdk";
import { useBrigd } from "../../testlib/brigd.js";

describe("templates", () => {
  const { brigd } = useBrigd(before, after);
  const client = () => brigd().client;

  test("build, cache hit, use, log, failed step, delete", async () => {
    const spec = {
      from: "minimal",
      tag: "v1",
      files: { "/opt/hi.sh": { content: "#!/bin/sh\necho hi $WHO\n", mode: 0o755 } },
      run: ["echo made > made"],
      env: { WHO: "ts" },
      workdir: "/w",
    };
    const t = await Template.build("ts-tpl", spec, { client: client() });
    try {
      assert.equal(t.ref, "ts-tpl:v1");
      assert.equal(t.cached, false);
      assert.match(t.key, /^[0-9a-f]{16}$/);
      const again = await Template.build("ts-tpl", spec, { client: client() });
      assert.equal(again.cached, true);
      assert.equal(again.key, t.key);
      assert.deepEqual((await t.log()).map((s) => s.exit_code), [0]);
      {
        await using sb = await Sandbox.create({ template: t.ref, client: client() });
        assert.equal((await sb.exec("cat made; /opt/hi.sh")).stdout, "made\nhi ts\n");
      }
      const failed = await Template.build("ts-bad", { from: "minimal", run: ["echo nope; exit 4"] }, {
        client: client(),
      }).catch((e: unknown) => e);
      assert.ok(failed instanceof BuildFailedError);
      assert.equal(failed.status, 422);
      assert.equal(failed.step, 1);
      assert.equal(failed.exitCode, 4);
      assert.match(failed.outputTail, /nope/);
    } finally {
      await t.delete({ missingOk: true });
    }
    await assert.rejects(Template.get("ts-tpl:v1", { client: client() }), NotFoundError);
  });

  test("onLog follows the build's log live, same outcome", async () => {
    const got: string[] = [];
    const onLog = (s: string) => got.push(s);
    const spec = { from: "minimal", run: ["echo one", "echo two"] };
    const t = await Template.build("ts-live", spec, { client: client(), onLog });
    try {
      assert.equal(t.ref, "ts-live:latest");
      assert.equal(t.cached, false);
      assert.match(got.join(""), /==> step 1 \(run\): echo one\none\n/);
      assert.match(got.join(""), /==> step 2: exit code 0/);
      assert.equal((await Template.build("ts-live", spec, { client: client(), onLog })).cached, true);
      const failed = await Template.build("ts-live-bad", { from: "minimal", run: ["echo nope; exit 4"] }, {
        client: client(),
        onLog,
      }).catch((e: unknown) => e);
      assert.ok(failed instanceof BuildFailedError);
      assert.equal(failed.exitCode, 4);
      assert.match(got.join(""), /nope/);
    } finally {
      await t.delete({ missingOk: true });
    }
  });
});
