/**
 * cli.ts - `brig-mcp`: serves brig's MCP tools over stdio (default) or
 * streamable HTTP on 127.0.0.1 (`--http PORT`).  brigd is found through
 * BRIG_URL and BRIG_API_KEY.  Sandboxes made with sandbox_create are deleted
 * when the server stops (stdin closed, SIGINT, SIGTERM) unless --keep-sandboxes.
 */
import { randomUUID } from "node:crypto";
import * as http from "node:http";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { BrigClient } from "@brig/sdk";
import { createServer, VERSION } from "./server.js";

const USAGE = `usage: brig-mcp [--http PORT] [--keep-sandboxes]

Serves brig's sandbox tools to an MCP client.

  (no option)        stdio: the client starts brig-mcp and talks on stdin/stdout
  --http PORT        streamable HTTP on http://127.0.0.1:PORT/mcp (0: any free port)
  --keep-sandboxes   leave sandboxes made with sandbox_create when brig-mcp stops
  --version, --help

Environment: BRIG_URL (default http://127.0.0.1:7070), BRIG_API_KEY.
`;

interface Args {
  httpPort?: number;
  keep: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { keep: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--help" || a === "-h") {
      process.stdout.write(USAGE);
      process.exit(0);
    } else if (a === "--version") {
      process.stdout.write(`brig-mcp ${VERSION}\n`);
      process.exit(0);
    } else if (a === "--keep-sandboxes") {
      args.keep = true;
    } else if (a === "--http" || a.startsWith("--http=")) {
      const v = a.includes("=") ? a.slice(7) : argv[++i];
      const port = Number(v);
      if (v === undefined || !Number.isInteger(port) || port < 0 || port > 65535) usage(`--http needs a port, not '${v ?? ""}'`);
      args.httpPort = port;
    } else {
      usage(`unknown argument '${a}'`);
    }
  }
  return args;
}

function usage(msg: string): never {
  process.stderr.write(`brig-mcp: ${msg}\n${USAGE}`);
  process.exit(2);
}

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const args = parseArgs(argv);
  const client = new BrigClient();
  const created = new Set<string>();
  const stops: (() => Promise<void>)[] = [];
  let stopping = false;

  async function stop(code: number): Promise<never> {
    if (!stopping) {
      stopping = true;
      for (const s of stops) await s().catch(() => undefined);
      if (!args.keep)
        await Promise.all(
          [...created].map((id) => client.json("DELETE", `/v1/sandboxes/${id}`).catch(() => undefined)),
        );
      client.close();
    }
    process.exit(code);
  }
  process.on("SIGINT", () => void stop(130));
  process.on("SIGTERM", () => void stop(143));

  if (args.httpPort === undefined) {
    const server = createServer({ client, created });
    const transport = new StdioServerTransport();
    // The client closing our stdin is the end of the session.
    process.stdin.on("end", () => void stop(0));
    process.stdin.on("close", () => void stop(0));
    stops.push(() => server.close());
    await server.connect(transport);
    return;
  }

  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const httpServer = http.createServer((req, res) => {
    void handle(req, res).catch((e: unknown) => {
      process.stderr.write(`brig-mcp: ${e instanceof Error ? e.stack : String(e)}\n`);
      if (!res.headersSent) res.writeHead(500).end();
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? "").split("?")[0];
    if (path !== "/mcp") {
      res.writeHead(404, { "content-type": "text/plain" }).end("brig-mcp serves MCP at /mcp\n");
      return;
    }
    const sid = req.headers["mcp-session-id"];
    const known = typeof sid === "string" ? sessions.get(sid) : undefined;
    if (known) {
      await known.handleRequest(req, res);
      return;
    }
    if (sid !== undefined || req.method !== "POST") {
      const msg = sid === undefined ? "no session: initialize with a POST first" : "unknown session";
      res
        .writeHead(sid === undefined ? 400 : 404, { "content-type": "application/json" })
        .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: msg }, id: null }));
      return;
    }
    // A new session (the transport refuses anything but an initialize request).
    const port = (httpServer.address() as { port: number }).port;
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, transport),
      enableDnsRebindingProtection: true,
      allowedHosts: [`127.0.0.1:${port}`, `localhost:${port}`],
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    const server = createServer({ client, created });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  }

  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(args.httpPort, "127.0.0.1", () => resolve());
  });
  stops.push(async () => {
    for (const t of sessions.values()) await t.close().catch(() => undefined);
    const closed = new Promise((r) => httpServer.close(() => r(undefined)));
    httpServer.closeAllConnections();
    await closed;
  });
  const port = (httpServer.address() as { port: number }).port;
  process.stderr.write(`brig-mcp ${VERSION}: streamable HTTP on http://127.0.0.1:${port}/mcp\n`);
}
