/** Sandbox lifecycle, the client and typed errors, against a real brigd. */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  AuthError,
  BrigClient,
  BrigError,
  ConflictError,
  ConnectionError,
  ForbiddenError,
  InvalidRequestError,
  LimitExceededError,
  NotFoundError,
  PaymentRequiredError,
  Sandbox,
} from "@brig/sdk";
import { startBrigd, useBrigd, type Brigd } from "../../testlib/brigd.js";

describe("sandboxes", () => {
  const { brigd } = useBrigd(before, after);
  const client = () => brigd().client;

  test("create, list, connect, refresh, kill", async () => {
    const sb = await Sandbox.create({ template: "minimal", client: client() });
    try {
      assert.match(sb.id, /^sbx_[a-z0-9]{26}$/);
      assert.equal(sb.template, "minimal");
      assert.equal(sb.info.state, "running");
      assert.ok(!Number.isNaN(Date.parse(sb.info.createdAt)), "createdAt is a date");

      const listed = await Sandbox.list({ client: client() });
      assert.deepEqual(
        listed.map((s) => s.id),
        [sb.id],
      );
      assert.equal(listed[0]!.createdAt, sb.info.createdAt);

      const again = await Sandbox.connect(sb.id, { client: client() });
      assert.equal(again.id, sb.id);
      assert.equal((await again.exec("echo $((6*7))")).stdout, "42\n");
      assert.equal((await sb.refresh()).id, sb.id);
    } finally {
      await sb.kill();
    }
    // An ended sandbox is kept on record for a while: state, reason, cost.
    const ended = await Sandbox.connect(sb.id, { client: client() });
    assert.equal(ended.info.state, "deleted");
    assert.equal(ended.info.reason, "deleted_by_api");
    assert.equal(ended.info.endReason, "deleted");
    // Its audit timeline, every page, also after it ended.
    const tl = await ended.timeline();
    assert.deepEqual(
      tl.map((e) => e.kind),
      ["sandbox.created", "exec", "sandbox.ended"],
    );
    assert.equal((tl[1]!.data as { reason: string }).reason, "exited");
    assert.equal((tl[2]!.data as { end_reason: string }).end_reason, "deleted");
    assert.ok(Date.parse(ended.info.deletedAt!) >= Date.parse(sb.info.createdAt));
    assert.equal(typeof ended.info.costMicroUsd, "number");
    assert.ok(ended.info.costMicroUsd! > 0, "charged at least the 60-second minimum");
    await assert.rejects(ended.exec("true"), NotFoundError);
    await sb.kill(); // a sandbox already gone is fine
    assert.deepEqual(await Sandbox.list({ client: client() }), []);
  });

  test("await using deletes the sandbox at the end of the scope, also after a throw", async () => {
    let id = "";
    {
      await using sb = await Sandbox.create({ template: "minimal", client: client() });
      id = sb.id;
      assert.equal((await sb.exec("true")).exitCode, 0);
    }
    assert.equal((await Sandbox.connect(id, { client: client() })).info.state, "deleted");

    await assert.rejects(async () => {
      await using sb = await Sandbox.create({ template: "minimal", client: client() });
      id = sb.id;
      throw new Error("boom");
    }, /boom/);
    assert.equal((await Sandbox.connect(id, { client: client() })).info.state, "deleted");
    assert.deepEqual(await Sandbox.list({ client: client() }), []);
  });

  test("url and apiKey options, and BRIG_URL / BRIG_API_KEY from the environment", async () => {
    await using sb = await Sandbox.create({ template: "minimal", url: brigd().url + "/", apiKey: brigd().key });
    assert.equal(sb.client.url, brigd().url);
    const saved = { url: process.env.BRIG_URL, key: process.env.BRIG_API_KEY };
    process.env.BRIG_URL = brigd().url;
    process.env.BRIG_API_KEY = brigd().key;
    try {
      const c = new BrigClient();
      assert.deepEqual(
        (await Sandbox.list({ client: c })).map((s) => s.id),
        [sb.id],
      );
      c.close();
    } finally {
      for (const [k, v] of [["BRIG_URL", saved.url], ["BRIG_API_KEY", saved.key]] as const)
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
    sb.client.close();
  });

  test("errors are typed, with status, code and message", async () => {
    const missing = "sbx_" + "a".repeat(26);
    const e = await Sandbox.connect(missing, { client: client() }).catch((x: unknown) => x);
    assert.ok(e instanceof NotFoundError && e instanceof BrigError);
    assert.equal(e.status, 404);
    assert.equal(e.code, "not_found");
    assert.match(e.message, /sbx_a+/);
    assert.equal(e.name, "NotFoundError");

    const bad = await Sandbox.create({ template: "no-such-template", client: client() }).catch((x: unknown) => x);
    assert.ok(bad instanceof InvalidRequestError, String(bad));
    assert.equal(bad.status, 400);
    assert.equal(bad.code, "invalid_request");

    const anon = new BrigClient({ url: brigd().url, apiKey: "brig_not_a_key" });
    const auth = await Sandbox.list({ client: anon }).catch((x: unknown) => x);
    assert.ok(auth instanceof AuthError, String(auth));
    assert.equal(auth.status, 401);
    assert.equal(auth.code, "unauthorized");
    anon.close();

    // Nothing listens on port 9 of the loopback.
    const nowhere = new BrigClient({ url: "http://127.0.0.1:9", apiKey: "x" });
    const conn = await Sandbox.list({ client: nowhere }).catch((x: unknown) => x);
    assert.ok(conn instanceof ConnectionError, String(conn));
    assert.equal(conn.status, 0);
  });

  test("health, templates, tariffs, account", async () => {
    const h = await client().health();
    assert.equal(h.status, "ok");
    const names = (await client().templates()).map((t) => t.name);
    assert.ok(names.includes("minimal") && names.includes("base"), names.join(","));
    const t = await client().tariffs();
    assert.ok(t.tariffs.some((x) => x.name === t.default), JSON.stringify(t));
    const acct = await client().account();
    assert.equal(typeof acct.balance_micro_usd, "number");
  });

  test("usage, ledger page by page, accounts (operator), ended sandboxes", async () => {
    const c = client();
    const sb = await Sandbox.create({ template: "minimal", client: c });
    await sb.kill();
    const days = await c.usage(3);
    assert.equal(days.length, 3);
    assert.match(days[2]!.date, /^\d{4}-\d{2}-\d{2}$/);
    assert.equal(days[2]!.spentMicroUsd, (await c.account()).usage_today_micro_usd);
    assert.equal(days[2]!.spent, (await c.json<{ days: { spent: string }[] }>("GET", "/v1/account/usage?days=3")).days[2]!.spent);
    await assert.rejects(c.usage(0), InvalidRequestError);

    const first = await c.ledger({ limit: 1 });
    assert.equal(first.entries.length, 1);
    const charge = first.entries[0]!;
    assert.equal(charge.kind, "charge");
    assert.equal(charge.sandboxId, sb.id);
    assert.equal(charge.amountMicroUsd, 600);
    assert.equal(first.nextBefore, charge.seq);
    const rest = await c.ledger({ before: first.nextBefore! });
    assert.ok(rest.entries.every((e) => e.seq < charge.seq));
    const every: number[] = [];
    for await (const e of c.ledgerEntries(1)) every.push(e.seq);
    assert.deepEqual(every, [...every].sort((a, b) => b - a));
    assert.equal(every[0], charge.seq);

    await assert.rejects(c.accounts(), ForbiddenError);
    const op = new BrigClient({ url: brigd().url, apiKey: brigd().operatorKey });
    try {
      const ids = (await op.accounts()).map((a) => a.id);
      assert.ok(ids.includes((await c.account()).id));
    } finally {
      op.close();
    }

    const ended = await Sandbox.listEnded({ client: c });
    const mine = ended.find((e) => e.id === sb.id);
    assert.ok(mine, "the ended sandbox is listed");
    assert.equal(mine.state, "deleted");
    assert.equal(mine.endReason, "deleted");
    assert.equal(mine.cost, "$0.000600");
    assert.ok((await Sandbox.listEnded({ client: c, since: new Date(Date.parse(mine.deletedAt!)) })).some((e) => e.id === sb.id));
    assert.deepEqual(await Sandbox.listEnded({ client: c, since: "2999-01-01T00:00:00Z" }), []);
    await assert.rejects(Sandbox.listEnded({ client: c, since: "never" }), InvalidRequestError);
  });

  test("create with tariff, env, secrets, timeouts; setTimeout; network log", async () => {
    const before = Date.now();
    await using sb = await Sandbox.create({
      template: "minimal",
      client: client(),
      tariff: "small",
      env: { GREETING: "hello", SHARED: "from-sandbox" },
      secrets: { API_TOKEN: "s3cr3t-value" },
      idleTimeoutMs: 120_000,
      maxLifetimeMs: 600_000,
    });
    assert.equal(sb.info.tariff, "small");
    assert.deepEqual([...sb.info.env!].sort(), ["GREETING", "SHARED"]);
    assert.deepEqual(sb.info.secrets, ["API_TOKEN"]);
    assert.equal(sb.info.idleTimeoutMs, 120_000);
    const lifetime = Date.parse(sb.info.expiresAt!) - before;
    assert.ok(lifetime > 590_000 && lifetime < 610_000, `expires ${lifetime} ms after create`);

    const r = await sb.exec("echo $GREETING $SHARED $API_TOKEN", { env: { SHARED: "from-exec" } });
    assert.equal(r.stdout, "hello from-exec [REDACTED:API_TOKEN]\n");
    let streamed = "";
    await sb.exec("echo s3cr3t-value", { onStdout: (d) => (streamed += d) });
    assert.equal(streamed, "[REDACTED:API_TOKEN]\n");

    const info = await sb.setTimeout(300_000);
    assert.equal(sb.info, info);
    const left = Date.parse(info.expiresAt!) - Date.now();
    assert.ok(left > 290_000 && left <= 301_000, `expires in ${left} ms`);
    assert.ok(Array.isArray(await sb.networkLog()));
    const m = await sb.metrics();
    assert.equal(m.state, "running");
    assert.ok(Array.isArray(m.samples));

    await assert.rejects(Sandbox.create({ template: "minimal", client: client(), tariff: "no-such-tariff" }), InvalidRequestError);
  });

  test("pause and resume", async () => {
    await using sb = await Sandbox.create({ template: "minimal", client: client() });
    await assert.rejects(sb.pause({ memory: "checkpoint" }), (e: Error) => e instanceof InvalidRequestError && /checkpoint/.test(e.message));
    const info = await sb.pause();
    assert.equal(info.state, "paused");
    assert.equal(info.memory, "resident");
    assert.equal((await sb.pause()).state, "paused");
    await assert.rejects(sb.exec("true"), (e: Error) => e instanceof ConflictError && /paused/.test(e.message));
    assert.equal((await sb.resume()).state, "running");
    assert.equal((await sb.exec("echo back")).stdout, "back\n");
  });

  test("snapshot and fork", async () => {
    await using sb = await Sandbox.create({ template: "minimal", client: client() });
    await sb.exec("echo snap > /root/s");
    const snap = await sb.snapshot("ts");
    assert.equal(snap.name, "ts");
    {
      await using child = await Sandbox.create({ snapshot: snap.id as string, client: client() });
      assert.equal((await child.exec("cat /root/s")).stdout, "snap\n");
    }
    await client().json("DELETE", `/v1/snapshots/${snap.id as string}`);
    const kids = await sb.fork(2);
    assert.equal(kids.length, 2);
    for (const k of kids) {
      assert.equal((await k.exec("cat /root/s")).stdout, "snap\n");
      await k.kill();
    }
  });

  test("onIdle: sent and shown", async () => {
    await using sb = await Sandbox.create({ template: "minimal", client: client(), onIdle: "pause" });
    assert.equal(sb.info.onIdle, "pause");
    await assert.rejects(
      Sandbox.create({ template: "minimal", client: client(), onIdle: "sleep" as "pause" }),
      InvalidRequestError,
    );
  });

  test("isolation: sent, shown, refused by a project's policy", async () => {
    await using sb = await Sandbox.create({ template: "minimal", client: client(), isolation: "container" });
    assert.equal(sb.info.isolation, "container");
    await assert.rejects(
      Sandbox.create({ template: "minimal", client: client(), isolation: "kvm" as "gvisor" }),
      InvalidRequestError,
    );
    const p = (await client().json("POST", "/v1/projects", { json: { name: "ts-gvisor" } })) as { id: string };
    await client().json("PATCH", `/v1/projects/${p.id}`, { json: { isolation: { allowed: ["gvisor"] } } });
    const k = (await client().json("POST", `/v1/projects/${p.id}/keys`, { json: { scope: "sandbox" } })) as {
      key: string;
    };
    const agent = new BrigClient({ url: brigd().url, apiKey: k.key });
    const e = await Sandbox.create({ template: "minimal", client: agent, isolation: "container" }).catch((x: unknown) => x);
    assert.ok(e instanceof ForbiddenError, String(e));
    assert.match(e.message, /allowed modes are gvisor/);
  });

  test("limits: a daily spend limit is a LimitExceededError (429)", async () => {
    await client().json("PATCH", "/v1/account", { json: { daily_limit_micro_usd: 0 } });
    try {
      const e = await Sandbox.create({ template: "minimal", client: client() }).catch((x: unknown) => x);
      assert.ok(e instanceof LimitExceededError && !(e instanceof PaymentRequiredError), String(e));
      assert.equal(e.status, 429);
      assert.equal(e.code, "limit_exceeded");
      assert.match(e.message, /daily spend limit/);
    } finally {
      await client().json("PATCH", "/v1/account", { json: { daily_limit_micro_usd: null } });
    }
  });
});

describe("an account without credit, one live sandbox at most", () => {
  let d: Brigd;
  before(async () => {
    d = await startBrigd({ config: "[brigd]\ninitial_credit_micro_usd = 0\nmax_live_per_account = 1\n" });
  });
  after(async () => {
    assert.deepEqual(await d?.stop(), []);
  });

  test("no balance is a PaymentRequiredError (402); over the concurrency limit a LimitExceededError (429)", async () => {
    const e = await Sandbox.create({ template: "minimal", client: d.client }).catch((x: unknown) => x);
    assert.ok(e instanceof PaymentRequiredError && e instanceof LimitExceededError, String(e));
    assert.equal(e.status, 402);
    assert.equal(e.code, "payment_required");

    const operator = new BrigClient({ url: d.url, apiKey: d.operatorKey });
    await operator.json("POST", `/v1/accounts/${(await d.client.account()).id}/credits`, {
      json: { amount_micro_usd: 1_000_000, note: "sdk test" },
    });
    operator.close();
    await using sb = await Sandbox.create({ template: "minimal", client: d.client });
    const over = await Sandbox.create({ template: "minimal", client: d.client }).catch((x: unknown) => x);
    assert.ok(over instanceof LimitExceededError && !(over instanceof PaymentRequiredError), String(over));
    assert.equal(over.status, 429);
    assert.equal((await sb.exec("true")).exitCode, 0);
  });
});
