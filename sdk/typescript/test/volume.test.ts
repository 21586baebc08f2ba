/** Volumes through the SDK, against a real brigd (docs/volumes.md). */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ConflictError, InvalidRequestError, NotFoundError, Sandbox, Volume } from "@brig/sdk";
import { useBrigd } from "../../testlib/brigd.js";

describe("volumes", () => {
  const { brigd } = useBrigd(before, after);
  const client = () => brigd().client;

  test("create, mount, read back, one writer, delete", async () => {
    const vol = await Volume.create("data", 32, { client: client() });
    try {
      assert.match(vol.id, /^vol_[a-z2-7]{26}$/);
      assert.equal(vol.info.sizeMib, 32);
      assert.deepEqual(vol.info.mountedBy, []);
      assert.equal((await Volume.get("data", { client: client() })).id, vol.id);
      assert.deepEqual(
        (await Volume.list({ client: client() })).map((v) => v.id),
        [vol.id],
      );
      await assert.rejects(Volume.create("data", 16, { client: client() }), ConflictError);
      await assert.rejects(Volume.create("Bad", 16, { client: client() }), InvalidRequestError);
      {
        await using sb = await Sandbox.create({ template: "minimal", volumes: [vol.mount("/data")], client: client() });
        await sb.upload("/data/f", "kept");
        const users = (await vol.refresh()).mountedBy;
        assert.deepEqual(users, [{ sandboxId: sb.id, path: "/data", readOnly: false }]);
        await assert.rejects(vol.delete(), ConflictError);
        await assert.rejects(
          Sandbox.create({ template: "minimal", volumes: ["data:/r:ro"], client: client() }),
          ConflictError,
        );
      }
      {
        await using sb = await Sandbox.create({ template: "minimal", volumes: ["data:/r:ro"], client: client() });
        assert.equal((await sb.exec("cat /r/f")).stdout, "kept");
        const r = await sb.exec("echo x > /r/g");
        assert.notEqual(r.exitCode, 0);
      }
      await assert.rejects(Sandbox.create({ volumes: ["no-path"], client: client() }), TypeError);
    } finally {
      await vol.delete({ missingOk: true });
    }
    await assert.rejects(Volume.get("data", { client: client() }), NotFoundError);
  });
});
