/**
 * sandbox.ts - the Sandbox class: create / connect / list, commands (buffered,
 * streamed, background), files and file-system operations.
 *
 *   await using sb = await Sandbox.create({ template: "base" });
 *   await sb.upload("/root/task.py", code);
 *   const r = await sb.exec("python3 /root/task.py", { timeoutMs: 55_000 });
 *   // sb is deleted here, also when something above threw
 */
import type { BodyInit } from "./client.js";
import { BrigClient, ndjson, readBody, readBytes } from "./client.js";
import { ConnectionError, NotFoundError } from "./errors.js";
import { Process, streamError } from "./process.js";
import type {
  CreateOptions,
  Credential,
  ExecOptions,
  ExecReason,
  ExecResult,
  FileEntry,
  FileMode,
  ProcessInfo,
  SandboxInfo,
} from "./types.js";
import { camel, octal, outputText, seconds, TextStream } from "./util.js";
import { volumeMounts } from "./volume.js";

/** Where to find brigd: a client, or the url/key to make one (default: BRIG_URL, BRIG_API_KEY). */
import type { ConnectOptions } from "./client.js";
export type { ConnectOptions };

/** What a streamed exec keeps of each stream for its result (like brigd's buffered limit). */
const STREAM_KEEP_CHARS = 10 * 1024 * 1024;

export class Sandbox {
  readonly id: string;
  /** The client this sandbox talks through. */
  readonly client: BrigClient;
  /** The last state seen (from create, connect or refresh). */
  info: SandboxInfo;
  readonly #path: string;

  /** @internal Use `Sandbox.create` or `Sandbox.connect`. */
  constructor(client: BrigClient, info: SandboxInfo) {
    this.client = client;
    this.id = info.id;
    this.info = info;
    this.#path = `/v1/sandboxes/${encodeURIComponent(info.id)}`;
  }

  get template(): string {
    return this.info.template;
  }

  /**
   * Creates a sandbox and returns it once its agent answers.  Only the fields
   * you set are sent (brigd refuses fields it does not know).
   */
  static async create(options: CreateOptions & ConnectOptions = {}): Promise<Sandbox> {
    const client = BrigClient.from(options);
    const body: Record<string, unknown> = {};
    if (options.template !== undefined) body.template = options.template;
    if (options.tariff !== undefined) body.tariff = options.tariff;
    if (options.env !== undefined) body.env = options.env;
    if (options.secrets !== undefined) body.secrets = options.secrets;
    if (options.secretRefs !== undefined) body.secret_refs = options.secretRefs;
    if (options.idleTimeoutMs !== undefined) body.idle_timeout = seconds(options.idleTimeoutMs);
    if (options.maxLifetimeMs !== undefined) body.max_lifetime = seconds(options.maxLifetimeMs);
    if (options.project !== undefined) body.project = options.project;
    if (options.isolation !== undefined) body.isolation = options.isolation;
    if (options.volumes !== undefined) body.volumes = volumeMounts(options.volumes);
    if (options.snapshot !== undefined) body.snapshot = options.snapshot;
    if (options.onIdle !== undefined) body.on_idle = options.onIdle;
    if (options.snapshots !== undefined) body.snapshots = options.snapshots;
    const info = await client.json("POST", "/v1/sandboxes", { json: body, signal: options.signal });
    return new Sandbox(client, sandboxInfo(info));
  }

  /**
   * A handle on an existing sandbox; NotFoundError if there is none with this
   * id (or it is another account's).  A sandbox that ended within the retention
   * period comes back with `info.state === "deleted"` (and `reason`, cost).
   */
  static async connect(id: string, options: ConnectOptions = {}): Promise<Sandbox> {
    const client = BrigClient.from(options);
    const info = await client.json("GET", `/v1/sandboxes/${encodeURIComponent(id)}`);
    return new Sandbox(client, sandboxInfo(info));
  }

  /** The caller's live sandboxes. */
  static async list(options: ConnectOptions = {}): Promise<SandboxInfo[]> {
    const r = await BrigClient.from(options).json<{ sandboxes: unknown[] }>("GET", "/v1/sandboxes");
    return r.sandboxes.map((s) => sandboxInfo(s));
  }

  /**
   * The caller's ended sandboxes (`GET /v1/sandboxes?state=ended`, every page), the last
   * ended first: those that ended at or after `since` (a Date, ISO 8601 text or ms since
   * the epoch; default and earliest: the start of brigd's retention period, 7 days by
   * default), each with `state`, `reason`, `endReason`, `deletedAt` and its cost.
   */
  static async listEnded(options: ConnectOptions & { since?: Date | string | number } = {}): Promise<SandboxInfo[]> {
    const client = BrigClient.from(options);
    const s = options.since;
    const since = s instanceof Date ? String(s.getTime()) : s === undefined ? undefined : String(s);
    const out: SandboxInfo[] = [];
    let before: string | undefined;
    for (;;) {
      const r = await client.json<{ sandboxes: unknown[]; next_before: string | null }>("GET", "/v1/sandboxes", {
        query: { state: "ended", limit: 1000, since, before },
      });
      out.push(...r.sandboxes.map((x) => sandboxInfo(x)));
      if (r.next_before === null) return out;
      before = r.next_before;
    }
  }

  /** Fetches the sandbox's current state. */
  async refresh(): Promise<SandboxInfo> {
    return (this.info = sandboxInfo(await this.client.json("GET", this.#path)));
  }

  /** Deletes the sandbox: every process is killed, its files are gone. A sandbox already gone is fine. */
  async kill(): Promise<void> {
    try {
      await this.client.json("DELETE", this.#path);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }

  /** `await using sb = await Sandbox.create()` deletes the sandbox at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.kill();
  }

  /**
   * Lets the sandbox live until `timeoutMs` from now (within brigd's maximum
   * lifetime); returns the updated info (`expiresAt`).
   */
  async setTimeout(timeoutMs: number): Promise<SandboxInfo> {
    const info = await this.client.json("POST", `${this.#path}/timeout`, { json: { timeout: seconds(timeoutMs) } });
    return (this.info = sandboxInfo(info));
  }

  /**
   * Pauses the sandbox: every process stops where it is and its memory stays resident
   * (see docs/snapshots.md). While paused, commands and file calls throw a ConflictError
   * ("paused") and its idle timeout stands still. Idempotent. `{ memory: "checkpoint" }`
   * (gVisor only): its memory is written to disk and freed on the host instead; resume
   * restores it (connections to it end). A container answers InvalidRequestError.
   */
  async pause(opts: { memory?: "resident" | "checkpoint" } = {}): Promise<SandboxInfo> {
    const body = opts.memory ? { json: { memory: opts.memory } } : undefined;
    return (this.info = sandboxInfo(await this.client.json("POST", `${this.#path}/pause`, body)));
  }

  /** Resumes a paused sandbox: its processes go on where they stopped. Idempotent. */
  async resume(): Promise<SandboxInfo> {
    return (this.info = sandboxInfo(await this.client.json("POST", `${this.#path}/resume`)));
  }

  /**
   * Takes a snapshot of its file system (crash-consistent; the sandbox goes on): `{ id: "snp_…",
   * digest, bytes, … }`.  `Sandbox.create({ snapshot: id })` starts new sandboxes from it.
   */
  async snapshot(name?: string): Promise<Record<string, unknown>> {
    const json = name === undefined ? undefined : { name };
    return await this.client.json<Record<string, unknown>>("POST", `${this.#path}/snapshot`, { json });
  }

  /**
   * `count` new sandboxes from its file system as it is now (fewer when a limit stopped them);
   * `memory`: a running gVisor sandbox created with `snapshots: true` goes on in each child, its
   * processes and memory too (docs/snapshots.md).
   */
  async fork(count = 1, options: { memory?: boolean } = {}): Promise<Sandbox[]> {
    const json: Record<string, unknown> = { count };
    if (options.memory) json.memory = true;
    const r = await this.client.json<{ sandboxes: unknown[] }>("POST", `${this.#path}/fork`, { json });
    return r.sandboxes.map((info) => new Sandbox(this.client, sandboxInfo(info)));
  }

  /** DNS queries and denied connections of the sandbox (see docs/network.md). */
  async networkLog(): Promise<Record<string, unknown>[]> {
    return (await this.client.json<{ entries: Record<string, unknown>[] }>("GET", `${this.#path}/network-log`)).entries;
  }

  /** Its usage samples, the last minute of them (see docs/metrics.md); after it ended, its black box. */
  async metrics(): Promise<Record<string, unknown>> {
    return await this.client.json<Record<string, unknown>>("GET", `${this.#path}/metrics`);
  }

  /** The sandbox's audit timeline, oldest first, every page (see docs/audit.md); also after it ended. */
  async timeline(): Promise<Record<string, unknown>[]> {
    const events: Record<string, unknown>[] = [];
    let after = 0;
    for (;;) {
      const page = await this.client.json<{ events: Record<string, unknown>[]; next_after: number | null }>(
        "GET",
        `${this.#path}/timeline?limit=1000&after=${after}`,
      );
      events.push(...page.events);
      if (page.next_after === null) return events;
      after = page.next_after;
    }
  }

  // ---- commands ---------------------------------------------------------------

  /**
   * Runs a command: a string goes to `bash -lc` (`sh -c` without bash), an
   * array is an argv (no shell).  Resolves with the result whatever the exit
   * code; rejects only when brigd cannot run it (BrigError).
   *
   * With `onStdout` / `onStderr` / `signal` the output is streamed as it comes.
   * With `background: true` it resolves at once with a Process handle.
   */
  exec(command: string | string[], options: ExecOptions & { background: true }): Promise<Process>;
  exec(command: string | string[], options?: ExecOptions & { background?: false }): Promise<ExecResult>;
  exec(command: string | string[], options?: ExecOptions): Promise<ExecResult | Process>;
  async exec(command: string | string[], options: ExecOptions = {}): Promise<ExecResult | Process> {
    const body = execBody(command, options);
    if (options.background) {
      if (options.onStdout || options.onStderr)
        throw new TypeError("onStdout/onStderr are for foreground commands; read a background one with process.output()");
      const info = await this.client.json("POST", `${this.#path}/exec`, { json: body, signal: options.signal });
      return new Process(this.client, this.id, camel<ProcessInfo>(info));
    }
    if (options.onStdout || options.onStderr || options.signal) return this.#execStreamed(body, options);
    const r = await this.client.json<Record<string, unknown>>("POST", `${this.#path}/exec`, { json: body });
    return {
      exitCode: r.exit_code as number,
      stdout: outputText(r, "stdout"),
      stderr: outputText(r, "stderr"),
      timedOut: !!r.timed_out,
      durationMs: (r.duration_ms as number) ?? 0,
      signal: (r.signal as number | null) ?? null,
      reason: (r.reason as ExecReason | null) ?? null,
      stdoutTruncated: !!r.stdout_truncated,
      stderrTruncated: !!r.stderr_truncated,
    };
  }

  async #execStreamed(body: Record<string, unknown>, options: ExecOptions): Promise<ExecResult> {
    const res = await this.client.request("POST", `${this.#path}/exec`, {
      json: body,
      headers: { accept: "application/x-ndjson" },
      signal: options.signal,
    });
    const out = { stdout: new Collected(options.onStdout), stderr: new Collected(options.onStderr) };
    for await (const ev of ndjson(res, options.signal)) {
      options.signal?.throwIfAborted(); // also when aborted by a callback, with events still buffered
      if (ev.type === "stdout" || ev.type === "stderr") {
        out[ev.type].add(ev.data as string, ev.encoding);
      } else if (ev.type === "exit") {
        out.stdout.end();
        out.stderr.end();
        return {
          exitCode: ev.exit_code as number,
          stdout: out.stdout.text,
          stderr: out.stderr.text,
          timedOut: !!ev.timed_out,
          durationMs: (ev.duration_ms as number) ?? 0,
          signal: (ev.signal as number | null) ?? null,
          reason: (ev.reason as ExecReason | null) ?? null,
          stdoutTruncated: out.stdout.truncated,
          stderrTruncated: out.stderr.truncated,
        };
      } else if (ev.type === "error") {
        throw streamError(ev);
      }
    }
    throw new ConnectionError("brigd's stream ended before the command's exit", { code: "connection" });
  }

  /** The sandbox's processes, running and recently finished, oldest first. */
  async processes(): Promise<ProcessInfo[]> {
    const r = await this.client.json<{ processes: unknown[] }>("GET", `${this.#path}/processes`);
    return r.processes.map((p) => camel<ProcessInfo>(p));
  }

  /** A handle on a process by pid (NotFoundError if brigd does not know it). */
  async getProcess(pid: number): Promise<Process> {
    const info = await this.client.json("GET", `${this.#path}/processes/${pid}`);
    return new Process(this.client, this.id, camel<ProcessInfo>(info));
  }

  // ---- files ----------------------------------------------------------------

  /**
   * Writes a file (atomically; missing parent directories are created).  `data`
   * may be text, bytes, a Blob or a stream of bytes (a Node stream, a web
   * ReadableStream, any async iterable), which is sent as it is read.
   */
  async upload(path: string, data: BodyInit, options: { mode?: FileMode } = {}): Promise<void> {
    const query = { path, mode: options.mode === undefined ? undefined : octal(options.mode) };
    await this.client.json("PUT", `${this.#path}/files`, { query, body: data });
  }

  /** A file's content. */
  async download(path: string): Promise<Uint8Array> {
    return readBytes(await this.client.request("GET", `${this.#path}/files`, { query: { path } }));
  }

  /** A file's content as text (UTF-8; invalid bytes become U+FFFD). */
  async downloadText(path: string): Promise<string> {
    return (await readBody(await this.client.request("GET", `${this.#path}/files`, { query: { path } }))).toString(
      "utf8",
    );
  }

  /** A file's content as a stream of chunks, for files too big to hold at once. */
  async downloadStream(path: string): Promise<AsyncIterable<Uint8Array>> {
    return this.client.request("GET", `${this.#path}/files`, { query: { path } });
  }

  /** A directory's entries, in name order. */
  async ls(path: string): Promise<FileEntry[]> {
    const r = await this.client.json<{ entries: FileEntry[] }>("GET", `${this.#path}/files`, {
      query: { path, list: 1 },
    });
    return r.entries;
  }

  /** The entry of `path` (a symlink itself, not its target). */
  async stat(path: string): Promise<FileEntry> {
    return this.client.json("GET", `${this.#path}/files`, { query: { path, stat: 1 } });
  }

  /** Whether `path` exists (a dangling symlink exists). */
  async exists(path: string): Promise<boolean> {
    try {
      await this.stat(path);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** Creates a directory; ConflictError when it exists (unless `parents`, like `mkdir -p`). */
  async mkdir(path: string, options: { mode?: FileMode; parents?: boolean } = {}): Promise<void> {
    const json: Record<string, unknown> = { path };
    if (options.mode !== undefined) json.mode = octal(options.mode);
    if (options.parents !== undefined) json.parents = options.parents;
    await this.client.json("POST", `${this.#path}/files/mkdir`, { json });
  }

  /** Removes a file or an empty directory; a non-empty one needs `recursive` (else ConflictError). */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<void> {
    await this.client.json("DELETE", `${this.#path}/files`, { query: { path, recursive: options.recursive || undefined } });
  }

  /** Renames `from` to `to` (atomically). */
  async move(from: string, to: string): Promise<void> {
    await this.client.json("POST", `${this.#path}/files/move`, { json: { from, to } });
  }

  /** Extracts a tar stream (gzip allowed) into `dir`, created if missing. */
  async uploadTar(dir: string, tar: BodyInit): Promise<void> {
    await this.client.json("PUT", `${this.#path}/files/tar`, {
      query: { path: dir },
      body: tar,
      headers: { "content-type": "application/x-tar" },
    });
  }

  /** `dir`'s contents as a tar archive, paths relative to `dir`. */
  async downloadTar(dir: string): Promise<Uint8Array> {
    return readBytes(await this.client.request("GET", `${this.#path}/files/tar`, { query: { path: dir } }));
  }
}

/** brigd's sandbox object as a SandboxInfo: camelCase keys, durations in ms like the rest of the SDK. */
function sandboxInfo(json: unknown): SandboxInfo {
  const info = camel<SandboxInfo>(json);
  for (const key of ["idleTimeout", "maxLifetime"] as const) {
    const v = info[key];
    if (typeof v === "number") {
      info[`${key}Ms`] = v * 1000;
      delete info[key];
    }
  }
  return info;
}

/** An exec's `credentials` as brigd reads them (`ttl_seconds`, `exec_only`, `value`). */
function credentialsBody(c: Record<string, number | Credential>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(c)) {
    if (typeof v === "number") out[name] = { ttl_seconds: v };
    else if (v !== null && typeof v === "object") {
      const o: Record<string, unknown> = {};
      if (v.ttlSeconds !== undefined) o.ttl_seconds = v.ttlSeconds;
      if (v.execOnly !== undefined) o.exec_only = v.execOnly;
      if (v.value !== undefined) o.value = v.value;
      out[name] = o;
    } else throw new TypeError(`credentials.${name}: a TTL in seconds or { ttlSeconds, execOnly, value }`);
  }
  return out;
}

/** The JSON body of an exec request: only what the caller set. */
function execBody(command: string | string[], o: ExecOptions): Record<string, unknown> {
  const body: Record<string, unknown> = Array.isArray(command) ? { argv: command } : { cmd: command };
  if (o.cwd !== undefined) body.cwd = o.cwd;
  if (o.env !== undefined) body.env = o.env;
  if (o.user !== undefined) body.user = o.user;
  if (o.timeoutMs !== undefined) body.timeout = seconds(o.timeoutMs);
  if (o.pty !== undefined) body.pty = { cols: o.pty.cols, rows: o.pty.rows };
  if (o.background) body.background = true;
  if (o.bufferBytes !== undefined) body.buffer_bytes = o.bufferBytes;
  if (o.credentials !== undefined) body.credentials = credentialsBody(o.credentials);
  if (typeof o.stdin === "string") body.stdin = o.stdin;
  else if (o.stdin !== undefined) {
    body.stdin = Buffer.from(o.stdin.buffer, o.stdin.byteOffset, o.stdin.byteLength).toString("base64");
    body.stdin_encoding = "base64";
  }
  return body;
}

/** One stream of a streamed exec: decoded, handed to the callback, kept (up to a limit) for the result. */
class Collected {
  text = "";
  truncated = false;
  readonly #stream = new TextStream();
  readonly #callback: ((data: string) => void) | undefined;

  constructor(callback: ((data: string) => void) | undefined) {
    this.#callback = callback;
  }

  add(data: string, encoding: unknown): void {
    this.#keep(this.#stream.push(data, encoding));
  }

  end(): void {
    this.#keep(this.#stream.flush());
  }

  #keep(s: string): void {
    if (!s) return;
    this.#callback?.(s);
    const room = STREAM_KEEP_CHARS - this.text.length;
    if (s.length > room) {
      this.truncated = true;
      s = s.slice(0, Math.max(0, room));
    }
    this.text += s;
  }
}
