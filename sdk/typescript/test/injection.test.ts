/** Credential injection rules and per-step credentials through the SDK, against a real brigd (docs/secrets.md). */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { BrigClient, ForbiddenError, InvalidRequestError, Sandbox } from "@brig/sdk";
import { useBrigd } from "../../testlib/brigd.js";

const RULE = { host: "api.example.test", headers: { "X-Temp": "{{secret:TEMP_KEY}}" } };

describe("injection", () => {
  const { brigd } = useBrigd(before, after);
  const client = () => brigd().client;

  async function project(): Promise<string> {
    const p = (await client().json<{ id: string }>("POST", "/v1/projects", { json: { name: "inject" } })).id;
    await client().request("PUT", `/v1/projects/${p}/secrets/TEMP_KEY`, { json: { value: "tmp_4Xk9Qw2Lr7Zp" } }).then(
      (r) => r.resume(),
    );
    return p;
  }

  test("rules: set, read, refused for a sandbox key, deleted", async () => {
    const p = await project();
    assert.deepEqual(await client().injectionRules(p), []);
    assert.deepEqual(await client().setInjectionRules(p, [RULE]), [RULE]);
    assert.deepEqual(await client().injectionRules(p), [RULE]);
    await assert.rejects(
      client().setInjectionRules(p, [{ host: "API.example.test", headers: { A: "b" } }]),
      InvalidRequestError,
    );
    const key = (await client().json<{ key: string }>("POST", `/v1/projects/${p}/keys`, { json: { scope: "sandbox" } }))
      .key;
    const sk = new BrigClient({ url: brigd().url, apiKey: key });
    try {
      await assert.rejects(sk.injectionRules(p), ForbiddenError);
      await assert.rejects(sk.deleteInjectionRules(p), ForbiddenError);
    } finally {
      sk.close();
    }
    assert.deepEqual(await client().injectionRules(p), [RULE]);
    await client().deleteInjectionRules(p);
    assert.deepEqual(await client().injectionRules(p), []);
  });

  test("exec with per-step credentials: the command holds a placeholder", async () => {
    const p = await project();
    await client().setInjectionRules(p, [RULE]);
    await using sb = await Sandbox.create({ template: "minimal", project: p, client: client() });
    for (const credentials of [
      { TEMP_KEY: 30 },
      { TEMP_KEY: { ttlSeconds: 30, value: "given-77" } },
      { TEMP_KEY: { execOnly: true } },
    ]) {
      const r = await sb.exec("echo $TEMP_KEY", { credentials });
      assert.equal(r.exitCode, 0);
      assert.match(r.stdout, /^brig-placeholder-/);
    }
    await assert.rejects(sb.exec("true", { credentials: { OTHER: 5 } }), InvalidRequestError);
    await assert.rejects(sb.exec("true", { credentials: { TEMP_KEY: 0 } }), InvalidRequestError);
    await client().deleteInjectionRules(p);
  });
});
