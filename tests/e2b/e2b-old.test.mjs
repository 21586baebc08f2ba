// e2b-old.test.mjs - the oldest e2b 2.x that E2B_SANDBOX_URL can point at brigd (2.7.0, pinned
// as the alias e2b-2.7): its routes are the older generation (POST /sandboxes,
// /sandboxes/{id}/connect, `secure` and `allow_internet_access` always sent).  Also what E2B's
// Python SDK sends (not installable here: no PyPI), as raw requests, the cross-tenant refusals,
// and the e2b_api switch.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { CommandExitError, NotFoundError as SandboxNotFoundError, Sandbox } from "e2b-2.7"; // 2.7 has no SandboxNotFoundError
import { client, startBrigd } from "../ui/brigd.mjs";
import { conform, matrixFile } from "./matrix.mjs";

matrixFile("e2b-old");

let brigd;

before(async () => {
  brigd = await startBrigd();
  process.env.E2B_API_URL = brigd.url;
  process.env.E2B_SANDBOX_URL = brigd.url;
  process.env.E2B_API_KEY = brigd.key;
});

after(async () => {
  if (brigd) await brigd.stop();
});

test("SDK 2.7: create, commands, files, list, connect, setTimeout, kill", async () => {
  const sbx = await Sandbox.create("base", { metadata: { gen: "old" }, envs: { A: "1" } });
  try {
    const r = await sbx.commands.run("echo $A; pwd");
    assert.equal(r.stdout, "1\n/home/user\n");
    await assert.rejects(sbx.commands.run("exit 7"), (e) => e instanceof CommandExitError && e.exitCode === 7);
    await sbx.files.write("/tmp/old.txt", "old sdk");
    assert.equal(await sbx.files.read("/tmp/old.txt"), "old sdk");
    const listed = await Sandbox.list({ query: { metadata: { gen: "old" } } }).nextItems();
    assert.deepEqual(listed.map((s) => s.sandboxId), [sbx.sandboxId]);
    await sbx.setTimeout(300_000);
    const again = await Sandbox.connect(sbx.sandboxId);
    assert.equal((await again.commands.run("echo again")).stdout, "again\n");
  } finally {
    await sbx.kill(); // 2.7's kill() answers nothing
  }
  await assert.rejects(Sandbox.connect(sbx.sandboxId), SandboxNotFoundError);
  assert.equal(await Sandbox.kill(sbx.sandboxId), false);
  conform("SDK 2.7.0: `Sandbox.create`, `connect`, `list`, `setTimeout`, `kill`, commands, files", "supported", "the older routes (`POST /sandboxes`, `/sandboxes/{id}/connect`); `/files` without `E2b-Sandbox-Id` is found by its token");
});

test("the Python SDK's requests: create is exactly 201 with every required key, list takes limit", async () => {
  const h = { "X-API-KEY": brigd.key, "Content-Type": "application/json" };
  const r = await fetch(`${brigd.url}/sandboxes`, {
    method: "POST",
    headers: h,
    body: JSON.stringify({ templateID: "base", timeout: 60, metadata: { py: "yes" }, envVars: {}, secure: true, allow_internet_access: true, autoPause: false }),
  });
  assert.equal(r.status, 201);
  const s = await r.json();
  for (const k of ["sandboxID", "templateID", "clientID", "envdVersion", "envdAccessToken"]) assert.ok(s[k], k);
  assert.match(s.envdVersion, /^\d+\.\d+\.\d+$/);
  const l = await fetch(`${brigd.url}/v2/sandboxes?limit=100&state=running%2Cpaused&metadata=py%3Dyes`, { headers: h });
  assert.equal(l.status, 200);
  const items = await l.json();
  assert.deepEqual(items.map((x) => x.sandboxID), [s.sandboxID]);
  for (const k of ["sandboxID", "templateID", "clientID", "startedAt", "endAt", "state", "cpuCount", "memoryMB", "diskSizeMB", "envdVersion"])
    assert.ok(k in items[0], k);
  const d = await fetch(`${brigd.url}/sandboxes/${s.sandboxID}`, { method: "DELETE", headers: h });
  assert.equal(d.status, 204);
  const again = await fetch(`${brigd.url}/sandboxes/${s.sandboxID}`, { method: "DELETE", headers: h });
  assert.equal(again.status, 404);
  assert.equal((await again.json()).code, 404);
  conform("the Python SDK's create and list", "supported", "exactly `201` with every required key; `limit=100`");
});

test("another account's key sees nothing, on both APIs", async () => {
  const op = client(brigd.url, brigd.operatorKey);
  const other = await op("POST", "/v1/accounts", { name: "other" });
  const sbx = await Sandbox.create("base");
  try {
    const theirs = { apiKey: other.api_key };
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId, theirs), SandboxNotFoundError);
    await assert.rejects(Sandbox.connect(sbx.sandboxId, theirs), SandboxNotFoundError);
    assert.equal(await Sandbox.kill(sbx.sandboxId, theirs), false);
    assert.equal((await Sandbox.list(theirs).nextItems()).length, 0);
    const t = await fetch(`${brigd.url}/sandboxes/${sbx.sandboxId}/timeout`, {
      method: "POST",
      headers: { "X-API-KEY": other.api_key, "Content-Type": "application/json" },
      body: '{"timeout":60}',
    });
    assert.equal(t.status, 404);
    // envd: the token is the sandbox's; without it nothing runs
    for (const token of [undefined, "f".repeat(64)]) {
      const r = await fetch(`${brigd.url}/process.Process/List`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "E2b-Sandbox-Id": sbx.sandboxId, ...(token ? { "X-Access-Token": token } : {}) },
        body: "{}",
      });
      assert.equal(r.status, 401);
    }
    const f = await fetch(`${brigd.url}/files?path=/etc/passwd`, { headers: { "E2b-Sandbox-Id": sbx.sandboxId } });
    assert.equal(f.status, 401);
    assert.equal((await f.json()).code, 401);
    assert.equal((await sbx.commands.run("echo still mine")).stdout, "still mine\n");
    conform("another account's key; a wrong or missing access token", "supported", "`404` on the control plane, `401` on envd");
  } finally {
    await sbx.kill();
  }
});

test("e2b_api = off: the routes are gone", async () => {
  const off = await startBrigd("e2b_api = off\n");
  try {
    const r = await fetch(`${off.url}/v2/sandboxes`, { headers: { "X-API-KEY": off.key } });
    assert.equal(r.status, 404);
    assert.match((await r.json()).message, /e2b_api/);
    const h = await fetch(`${off.url}/health`, { headers: { "E2b-Sandbox-Id": "sbx_x" } });
    assert.equal(h.status, 404);
  } finally {
    await off.stop();
  }
});
