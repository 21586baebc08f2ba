/** Status and code → error class, checked against a fake server (brigd cannot produce every status). */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import {
  AgentProtocolError,
  AuthError,
  BrigClient,
  BrigError,
  ConflictError,
  ForbiddenError,
  InvalidRequestError,
  LimitExceededError,
  MethodNotAllowedError,
  NoSpaceError,
  NotFoundError,
  PaymentRequiredError,
  Sandbox,
  ServerError,
  TooLargeError,
  UnavailableError,
} from "@brig/sdk";

let server: Server;
let client: BrigClient;
// The fake answers GET /v1/sandboxes/<status>_<code> with that status and error code.
before(async () => {
  server = createServer((req, res) => {
    const [status, code] = decodeURIComponent(req.url!.split("/").pop()!).split(/_(.*)/s);
    if (code === "html") {
      res.writeHead(Number(status), { "content-type": "text/html" }).end("<h1>Bad Gateway</h1>");
      return;
    }
    res
      .writeHead(Number(status), { "content-type": "application/json" })
      .end(JSON.stringify({ error: { code, message: `message for ${code}` } }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  client = new BrigClient({ url: `http://127.0.0.1:${port}`, apiKey: "k" });
});
after(() => {
  client.close();
  server.close();
});

const cases: [number, string, new (...a: never[]) => BrigError][] = [
  [400, "invalid_request", InvalidRequestError],
  [401, "unauthorized", AuthError],
  [402, "payment_required", PaymentRequiredError],
  [403, "forbidden", ForbiddenError],
  [404, "not_found", NotFoundError],
  [405, "method_not_allowed", MethodNotAllowedError],
  [409, "conflict", ConflictError],
  [413, "too_large", TooLargeError],
  [429, "limit_exceeded", LimitExceededError],
  [403, "limit_exceeded", LimitExceededError],
  [500, "internal", ServerError],
  [502, "agent_protocol", AgentProtocolError],
  [503, "unavailable", UnavailableError],
  [507, "no_space", NoSpaceError],
  [418, "teapot", BrigError],
];

for (const [status, code, cls] of cases) {
  test(`${status} ${code} → ${cls.name}`, async () => {
    const e = await Sandbox.connect(`${status}_${code}`, { client }).catch((x: unknown) => x);
    assert.ok(e instanceof cls, `${String(e)} is a ${cls.name}`);
    assert.equal((e as BrigError).constructor, cls);
    assert.equal((e as BrigError).status, status);
    assert.equal((e as BrigError).code, code);
    assert.equal((e as BrigError).message, `message for ${code}`);
  });
}

test("subclasses: 402 is a limit, 503/507 are server errors, 405 an invalid request", () => {
  assert.ok(new PaymentRequiredError("x") instanceof LimitExceededError);
  assert.ok(new NoSpaceError("x") instanceof ServerError);
  assert.ok(new UnavailableError("x") instanceof ServerError);
  assert.ok(new MethodNotAllowedError("x") instanceof InvalidRequestError);
});

test("a body that is not brig's JSON keeps its text", async () => {
  const e = await Sandbox.connect("502_html", { client }).catch((x: unknown) => x);
  assert.ok(e instanceof AgentProtocolError);
  assert.equal(e.code, "http_502");
  assert.equal(e.message, "<h1>Bad Gateway</h1>");
});
