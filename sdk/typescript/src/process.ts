/**
 * process.ts - a handle on a process in a sandbox (normally one started with
 * `exec(cmd, {background: true})`): wait for it, signal it, feed its stdin,
 * read or follow its output.  The process lives in the sandbox, not in this
 * object: another client can pick it up with `sandbox.getProcess(pid)`.
 */
import type { BrigClient } from "./client.js";
import { ndjson } from "./client.js";
import { apiError, TimeoutError } from "./errors.js";
import type { ExecReason, ProcessEvent, ProcessInfo, PtySize } from "./types.js";
import { camel, TextStream } from "./util.js";

/** The longest single wait request; longer waits are several in a row. */
const WAIT_SLICE_MS = 60_000;

export interface OutputOptions {
  /** Keep following live output until the process exits (default); false: what is buffered now. */
  follow?: boolean;
  signal?: AbortSignal;
}

export class Process {
  readonly pid: number;
  /** The last state seen (from start, wait or refresh). */
  info: ProcessInfo;
  readonly #client: BrigClient;
  readonly #base: string;

  /** @internal Use `sandbox.exec(cmd, {background: true})` or `sandbox.getProcess(pid)`. */
  constructor(client: BrigClient, sandboxId: string, info: ProcessInfo) {
    this.#client = client;
    this.pid = info.pid;
    this.info = info;
    this.#base = `/v1/sandboxes/${encodeURIComponent(sandboxId)}/processes/${info.pid}`;
  }

  /** Fetches the current state. */
  async refresh(): Promise<ProcessInfo> {
    return (this.info = camel<ProcessInfo>(await this.#client.json("GET", this.#base)));
  }

  /**
   * Waits until the process exits and returns its final state.  With
   * `timeoutMs`, throws TimeoutError if it still runs by then (it keeps running).
   */
  async wait(options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<ProcessInfo> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    for (;;) {
      // brigd reads "timeout": 0 as "no limit", so the last slice is ≥ 1 ms.
      const slice = Math.max(1, Math.min(WAIT_SLICE_MS, deadline - Date.now()));
      const info = await this.#client.json("POST", `${this.#base}/wait`, {
        json: { timeout: slice / 1000 },
        signal: options.signal,
      });
      this.info = camel<ProcessInfo>(info);
      if (!this.info.running) return this.info;
      if (Date.now() >= deadline)
        throw new TimeoutError(`process ${this.pid} still runs after ${options.timeoutMs} ms`, { code: "timeout" });
    }
  }

  /**
   * Sends a signal to the process group (default `SIGKILL`, which also kills
   * every descendant).  Names with or without `SIG`, or numbers.
   */
  async kill(signal: string | number = "SIGKILL"): Promise<void> {
    await this.#client.json("POST", `${this.#base}/signal`, { json: { signal } });
  }

  /** Writes to the process's stdin; returns the number of bytes taken. */
  async sendStdin(data: string | Uint8Array): Promise<number> {
    const r = await this.#client.json<{ bytes: number }>("POST", `${this.#base}/stdin`, { body: data });
    return r.bytes;
  }

  /** Closes the process's stdin: it reads EOF. */
  async closeStdin(): Promise<void> {
    await this.#client.json("POST", `${this.#base}/stdin/close`);
  }

  /** Resizes the process's pseudo-terminal (only for `pty` processes). */
  async resize(size: PtySize): Promise<void> {
    await this.#client.json("POST", `${this.#base}/resize`, { json: { cols: size.cols, rows: size.rows } });
  }

  /**
   * The process's output, from the oldest byte brigd still buffers, then live
   * until it exits (the last event is `exit`).  With `follow: false`, only what
   * is buffered now.  Breaking out of the loop leaves the process running.
   */
  async *output(options: OutputOptions = {}): AsyncGenerator<ProcessEvent> {
    const res = await this.#client.request("GET", `${this.#base}/output`, {
      query: { follow: options.follow === false ? 0 : undefined },
      headers: { accept: "application/x-ndjson" },
      signal: options.signal,
    });
    const text = { stdout: new TextStream(), stderr: new TextStream() };
    for await (const ev of ndjson(res, options.signal)) {
      switch (ev.type) {
        case "stdout":
        case "stderr": {
          const data = text[ev.type].push(ev.data as string, ev.encoding);
          if (data) yield { type: ev.type, data };
          break;
        }
        case "output":
          if (Number(ev.dropped_bytes) > 0) yield { type: "dropped", bytes: Number(ev.dropped_bytes) };
          break;
        case "dropped":
          yield { type: "dropped", bytes: Number(ev.bytes) };
          break;
        case "end":
          yield* flushed(text);
          break;
        case "exit": {
          yield* flushed(text);
          const e = camel<{ exitCode: number; signal: number | null; timedOut: boolean; durationMs?: number; reason?: ExecReason | null }>(ev);
          yield { type: "exit", exitCode: e.exitCode, signal: e.signal ?? null, timedOut: !!e.timedOut, durationMs: e.durationMs, reason: e.reason ?? null };
          break;
        }
        case "error":
          throw streamError(ev);
      }
    }
  }

  /** Same as `output()`: `for await (const ev of proc) …`. */
  [Symbol.asyncIterator](): AsyncGenerator<ProcessEvent> {
    return this.output();
  }

  /** The output buffered now, as text per stream (a snapshot; does not wait). */
  async outputText(): Promise<{ stdout: string; stderr: string }> {
    const out = { stdout: "", stderr: "" };
    for await (const ev of this.output({ follow: false }))
      if (ev.type === "stdout" || ev.type === "stderr") out[ev.type] += ev.data;
    return out;
  }
}

/** What partial characters are left in the text streams, at the end of the output. */
function* flushed(text: { stdout: TextStream; stderr: TextStream }): Generator<ProcessEvent> {
  for (const type of ["stdout", "stderr"] as const) {
    const data = text[type].flush();
    if (data) yield { type, data };
  }
}

/** The `{"type":"error",code,message}` event that ends a broken stream. */
export function streamError(ev: Record<string, unknown>): Error {
  return apiError(0, String(ev.code ?? "internal"), String(ev.message ?? "the stream failed"));
}
