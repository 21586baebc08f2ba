/**
 * server.ts - brig's MCP tools: sandbox_create, sandbox_exec, sandbox_upload,
 * sandbox_download, sandbox_list, sandbox_delete and the one-shot sandbox_run,
 * each a thin call into @brig/sdk.
 *
 * A command's non-zero exit is a normal tool result (the model reads the
 * error and retries); only a failure of brig itself (no such sandbox, bad
 * path, brigd unreachable) is a tool error (`isError: true`).
 */
import { readFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { BrigClient, BrigError, NotFoundError, Sandbox, type ExecResult } from "@brig/sdk";
import { z } from "zod";

export const VERSION: string = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;

export interface ServerOptions {
  /** The brigd to use; default: BRIG_URL / BRIG_API_KEY. */
  client?: BrigClient;
  /** Sandboxes made by sandbox_create are recorded here (to delete them when the server stops). */
  created?: Set<string>;
  /** Characters of each output stream a tool result keeps (the end of it); default 20000. */
  maxOutputChars?: number;
  /** The largest file sandbox_download returns; default 1 MiB. */
  maxDownloadBytes?: number;
}

/** While a command runs, a client that asked for progress hears from us this often. */
const PROGRESS_EVERY_MS = 5_000;

const sandboxId = z.string().describe("The sandbox's id (sbx_…), from sandbox_create or sandbox_list.");
const timeout = z
  .number()
  .min(0)
  .optional()
  .describe("Seconds before the command is killed (default 55; 0: no limit).");

const execOutput = {
  exit_code: z.number().describe("The command's exit status; 128+n when killed by signal n, 137 after a timeout."),
  stdout: z.string(),
  stderr: z.string(),
  timed_out: z.boolean(),
  duration_ms: z.number(),
  reason: z
    .string()
    .nullable()
    .describe("Why it ended: exited, signal, timeout, oom_killed (memory limit), pids_limit, disk_full."),
};

/** Makes an McpServer with brig's tools. Connect it to a transport to serve. */
export function createServer(options: ServerOptions = {}): McpServer {
  const client = options.client ?? BrigClient.default();
  const created = options.created ?? new Set<string>();
  const maxOut = options.maxOutputChars ?? 20_000;
  const maxDownload = options.maxDownloadBytes ?? 1024 * 1024;
  const server = new McpServer({ name: "brig", version: VERSION });

  const sandbox = (id: string) => Sandbox.connect(id, { client });

  /** Runs a command, streaming it (so progress can be reported and a cancel kills it). */
  async function run(sb: Sandbox, command: string, args: { timeout?: number; cwd?: string; env?: Record<string, string> }, extra: Extra) {
    const token = extra._meta?.progressToken;
    const started = Date.now();
    const timer =
      token === undefined
        ? undefined
        : setInterval(() => {
            const s = Math.round((Date.now() - started) / 1000);
            extra
              .sendNotification({
                method: "notifications/progress",
                params: { progressToken: token, progress: s, message: `running for ${s} s` },
              })
              .catch(() => undefined);
          }, PROGRESS_EVERY_MS);
    try {
      return await sb.exec(command, {
        timeoutMs: args.timeout === undefined ? undefined : args.timeout * 1000,
        cwd: args.cwd,
        env: args.env,
        signal: extra.signal,
      });
    } finally {
      clearInterval(timer);
    }
  }

  function execResult(r: ExecResult, prefix = ""): CallToolResult {
    const stdout = tail(r.stdout, maxOut);
    const stderr = tail(r.stderr, maxOut);
    let head = `${prefix}exit_code: ${r.exitCode}`;
    if (r.timedOut) head += " (timed out: the command was killed)";
    else if (r.reason === "oom_killed") head += " (killed by the out-of-memory killer: the sandbox's memory limit)";
    else if (r.reason === "pids_limit") head += " (it hit the sandbox's process limit)";
    else if (r.reason === "disk_full") head += " (the sandbox's disk is full)";
    else if (r.signal) head += ` (killed by signal ${r.signal})`;
    const text = `${head}\nstdout:\n${stdout || "(empty)"}\nstderr:\n${stderr || "(empty)"}`;
    return {
      content: [{ type: "text", text }],
      structuredContent: {
        exit_code: r.exitCode,
        stdout,
        stderr,
        timed_out: r.timedOut,
        duration_ms: r.durationMs,
        reason: r.reason ?? null,
      },
    };
  }

  server.registerTool(
    "sandbox_create",
    {
      title: "Create a sandbox",
      description:
        "Creates a new isolated Linux sandbox and returns its id. Template 'base' (default) has Python 3 with pip, " +
        "Node.js 22 with npm, bash, git and curl; 'minimal' is busybox only. Outbound network works. " +
        "Run commands with sandbox_exec; delete it with sandbox_delete when done.",
      inputSchema: {
        template: z.string().optional().describe("Template name: 'base' (default) or 'minimal'."),
        tariff: z.string().optional().describe("Size: 'small' (default), 'medium' or 'large', as the server defines them."),
        env: z.record(z.string(), z.string()).optional().describe("Environment variables for every command."),
        isolation: z
          .enum(["container", "gvisor", "microvm"])
          .optional()
          .describe(
            "'container' (the host's kernel, namespaces, seccomp), 'gvisor' (a kernel of its own in user space) " +
              "or 'microvm' (a virtual machine with its own kernel); " +
              "default: the project's, else the server's. Never silently changed: an unavailable mode is an error.",
          ),
        on_idle: z
          .enum(["delete", "pause"])
          .optional()
          .describe(
            "What its idle timeout does: 'delete' it, or 'pause' it (resume it with sandbox_resume; paused too " +
              "long, the server deletes it). Default: the project's, else 'delete'.",
          ),
      },
      outputSchema: {
        sandbox_id: z.string(),
        template: z.string(),
        state: z.string(),
        isolation: z.string().optional(),
      },
    },
    async (args) =>
      guard(async () => {
        const sb = await Sandbox.create({
          client,
          template: args.template,
          tariff: args.tariff,
          env: args.env,
          isolation: args.isolation,
          onIdle: args.on_idle,
        });
        created.add(sb.id);
        const tariff = sb.info.tariff ? `, tariff ${sb.info.tariff}` : "";
        const iso = sb.info.isolation ? `, isolation ${sb.info.isolation}` : "";
        return {
          content: [{ type: "text", text: `Created sandbox ${sb.id} (template ${sb.template}${tariff}${iso}).` }],
          structuredContent: {
            sandbox_id: sb.id,
            template: sb.template,
            state: sb.info.state,
            ...(sb.info.isolation ? { isolation: sb.info.isolation } : {}),
          },
        };
      }),
  );

  server.registerTool(
    "sandbox_exec",
    {
      title: "Run a command in a sandbox",
      description:
        "Runs a shell command (bash -lc) in a sandbox and returns its exit code, stdout and stderr. " +
        "A non-zero exit code is a normal result. Commands are killed after 55 s unless 'timeout' says otherwise. " +
        "Long output keeps its end.",
      inputSchema: {
        sandbox_id: sandboxId,
        command: z.string().min(1).describe("The shell command, e.g. 'python3 /root/main.py'."),
        timeout,
        cwd: z.string().optional().describe("Absolute working directory (default /root)."),
        env: z.record(z.string(), z.string()).optional().describe("Extra environment variables."),
      },
      outputSchema: execOutput,
      annotations: { openWorldHint: true },
    },
    async (args, extra) => guard(async () => execResult(await run(await sandbox(args.sandbox_id), args.command, args, extra))),
  );

  server.registerTool(
    "sandbox_upload",
    {
      title: "Write a file into a sandbox",
      description:
        "Writes a file in a sandbox (atomically; parent directories are created). " +
        "Content is text, or base64 with encoding 'base64' for binary files.",
      inputSchema: {
        sandbox_id: sandboxId,
        path: z.string().describe("Absolute path, e.g. /root/main.py."),
        content: z.string().describe("The file's content."),
        encoding: z.enum(["utf8", "base64"]).optional().describe("How content is encoded (default utf8)."),
        mode: z
          .string()
          .regex(/^0?[0-7]{3,4}$/)
          .optional()
          .describe("Octal permission bits, e.g. '0755' for a script (default 0644)."),
      },
    },
    async (args) =>
      guard(async () => {
        const data = args.encoding === "base64" ? Buffer.from(args.content, "base64") : Buffer.from(args.content, "utf8");
        await (await sandbox(args.sandbox_id)).upload(args.path, data, { mode: args.mode });
        return { content: [{ type: "text", text: `Wrote ${data.byteLength} bytes to ${args.path}.` }] };
      }),
  );

  server.registerTool(
    "sandbox_download",
    {
      title: "Read a file from a sandbox",
      description:
        `Reads a file from a sandbox (at most ${maxDownload} bytes). Text comes back as is; ` +
        "a file that is not UTF-8 text comes back base64-encoded, which the answer says.",
      inputSchema: { sandbox_id: sandboxId, path: z.string().describe("Absolute path of the file.") },
      annotations: { readOnlyHint: true },
    },
    async (args) =>
      guard(async () => {
        const sb = await sandbox(args.sandbox_id);
        const st = await sb.stat(args.path);
        if (st.type === "dir") return failure(`${args.path} is a directory; list it with sandbox_exec (ls -la).`);
        if (st.size > maxDownload)
          return failure(
            `${args.path} has ${st.size} bytes, more than the ${maxDownload} this tool returns; ` +
              "read a part with sandbox_exec (head, tail, grep).",
          );
        const bytes = await sb.download(args.path);
        let text: string;
        try {
          text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
        } catch {
          const b64 = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
          return { content: [{ type: "text", text: `(binary file, ${bytes.byteLength} bytes, base64)\n${b64}` }] };
        }
        return { content: [{ type: "text", text }] };
      }),
  );

  server.registerTool(
    "sandbox_list",
    {
      title: "List sandboxes",
      description: "Lists the live sandboxes of this API key: id, template, state and creation time.",
      inputSchema: {},
      outputSchema: {
        sandboxes: z.array(z.object({ sandbox_id: z.string(), template: z.string(), state: z.string(), created_at: z.string() })),
      },
      annotations: { readOnlyHint: true },
    },
    async () =>
      guard(async () => {
        const list = (await Sandbox.list({ client })).map((s) => ({
          sandbox_id: s.id,
          template: s.template,
          state: s.state,
          created_at: s.createdAt,
        }));
        const text = list.length
          ? list.map((s) => `${s.sandbox_id}  template=${s.template}  state=${s.state}  created=${s.created_at}`).join("\n")
          : "No sandboxes.";
        return { content: [{ type: "text", text }], structuredContent: { sandboxes: list } };
      }),
  );

  server.registerTool(
    "sandbox_delete",
    {
      title: "Delete a sandbox",
      description: "Deletes a sandbox: its processes are killed and its files are gone.",
      inputSchema: { sandbox_id: sandboxId },
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    async (args) =>
      guard(async () => {
        try {
          await client.json("DELETE", `/v1/sandboxes/${encodeURIComponent(args.sandbox_id)}`);
        } catch (e) {
          if (!(e instanceof NotFoundError)) throw e;
          created.delete(args.sandbox_id);
          return failure(`There is no sandbox ${args.sandbox_id} (already deleted?).`);
        }
        created.delete(args.sandbox_id);
        return { content: [{ type: "text", text: `Deleted sandbox ${args.sandbox_id}.` }] };
      }),
  );

  for (const [verb, title, description] of [
    [
      "pause",
      "Pause a sandbox",
      "Pauses a sandbox between steps: every process stops where it is and its memory is kept; " +
        "it costs little while paused and its idle timeout stands still. Commands and file calls " +
        "are refused until sandbox_resume. Pausing a paused sandbox changes nothing.",
    ],
    [
      "resume",
      "Resume a sandbox",
      "Resumes a paused sandbox: its processes (background ones included) go on where they stopped. " +
        "Resuming a running sandbox changes nothing.",
    ],
  ] as const) {
    server.registerTool(
      `sandbox_${verb}`,
      {
        title,
        description,
        inputSchema: {
          sandbox_id: sandboxId,
          ...(verb === "pause"
            ? {
                memory: z
                  .enum(["resident", "checkpoint"])
                  .optional()
                  .describe(
                    "'checkpoint' (gvisor sandboxes only): write its memory to disk and free it " +
                      "instead of keeping it resident; sandbox_resume restores it (connections to it end).",
                  ),
              }
            : {}),
        },
        outputSchema: { sandbox_id: z.string(), state: z.string() },
        annotations: { idempotentHint: true },
      },
      async (args: { sandbox_id: string; memory?: "resident" | "checkpoint" }) =>
        guard(async () => {
          const sb = await sandbox(args.sandbox_id);
          const info = verb === "pause" ? await sb.pause({ memory: args.memory }) : await sb.resume();
          return {
            content: [{ type: "text", text: `Sandbox ${info.id} is ${info.state}.` }],
            structuredContent: { sandbox_id: info.id, state: info.state },
          };
        }),
    );
  }

  server.registerTool(
    "sandbox_fork",
    {
      title: "Fork a sandbox",
      description:
        "Creates 1 to 16 new sandboxes that start from this sandbox's files as they are now, to try " +
        "several alternatives from the same point; each is its own afterwards (running processes do " +
        "not continue in them). The source goes on. Delete the children with sandbox_delete.",
      inputSchema: { sandbox_id: sandboxId, count: z.number().int().min(1).max(16).optional().describe("How many (default 1).") },
      outputSchema: { sandbox_ids: z.array(z.string()) },
    },
    async (args) =>
      guard(async () => {
        const kids = await (await sandbox(args.sandbox_id)).fork(args.count ?? 1);
        for (const k of kids) created.add(k.id);
        const ids = kids.map((k) => k.id);
        return {
          content: [{ type: "text", text: `Forked ${args.sandbox_id} into ${ids.join(", ")}.` }],
          structuredContent: { sandbox_ids: ids },
        };
      }),
  );

  server.registerTool(
    "sandbox_run",
    {
      title: "Run a command in a fresh sandbox",
      description:
        "One shot: creates a sandbox, runs the shell command in it, deletes it, and returns exit code, " +
        "stdout and stderr. Nothing is kept. For several steps, use sandbox_create and sandbox_exec instead.",
      inputSchema: {
        command: z.string().min(1).describe("The shell command, e.g. \"python3 -c 'print(1+1)'\"."),
        template: z.string().optional().describe("Template name: 'base' (default) or 'minimal'."),
        timeout,
      },
      outputSchema: execOutput,
      annotations: { openWorldHint: true },
    },
    async (args, extra) =>
      guard(async () => {
        await using sb = await Sandbox.create({ client, template: args.template });
        return execResult(await run(sb, args.command, args, extra));
      }),
  );

  return server;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** The end of a long output, saying how much was left out. */
function tail(s: string, max: number): string {
  if (s.length <= max) return s;
  return `[… ${s.length - max} characters omitted …]\n` + s.slice(s.length - max);
}

function failure(text: string): CallToolResult {
  return { content: [{ type: "text", text }], isError: true };
}

/** A brig failure as a tool error the model can read. */
async function guard(fn: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof BrigError) return failure(`brig: ${e.message} (${e.code}${e.status ? `, HTTP ${e.status}` : ""})`);
    if (e instanceof Error && e.name === "AbortError") return failure("cancelled: the command was killed");
    throw e;
  }
}
