/**
 * client.ts - the HTTP layer: one BrigClient per brigd (base URL + API key),
 * keep-alive connections, JSON / raw / NDJSON bodies, errors as BrigError.
 *
 * Built on node:http rather than fetch: brig's calls may legitimately stay
 * silent for up to an hour (a buffered exec with a long timeout, a wait, a quiet
 * stream), and Node's fetch gives up after 300 s without an answer or body
 * byte — a limit that cannot be lifted without the `undici` package.
 */
import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import { BrigError, ConnectionError, errorFromBody } from "./errors.js";
import type { InjectionRule, LedgerEntry, LedgerPage, UsageDay } from "./types.js";
import { camel } from "./util.js";

export interface ClientOptions {
  /** brigd's base URL; default `$BRIG_URL`, else `http://127.0.0.1:7070`. A path prefix is kept. */
  url?: string;
  /**
   * The API key; default `$BRIG_API_KEY`, else `$BRIG_STATE_DIR/admin.key`
   * (default `/var/lib/brig/admin.key`) when readable — like the `brig` CLI.
   */
  apiKey?: string;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
}

/** What a request body may be: bytes, text, or a stream of bytes (sent chunked). */
export type BodyInit =
  | string
  | Uint8Array
  | ArrayBuffer
  | Blob
  | AsyncIterable<Uint8Array | string>
  | ReadableStream<Uint8Array>;

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  /** A JSON body (sent with `Content-Type: application/json`). */
  json?: unknown;
  /** A raw body. */
  body?: BodyInit;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export type Response = http.IncomingMessage;

const DEFAULT_URL = "http://127.0.0.1:7070";

function defaultKey(): string | undefined {
  const env = process.env.BRIG_API_KEY;
  if (env) return env;
  const dir = process.env.BRIG_STATE_DIR || "/var/lib/brig";
  try {
    return readFileSync(`${dir}/admin.key`, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

let defaultClient: BrigClient | undefined;

/** A connection to one brigd. Cheap to keep; share one per process when you can. */
export class BrigClient {
  /** The base URL, without a trailing `/`. */
  readonly url: string;
  readonly #key: string | undefined;
  readonly #headers: Record<string, string>;
  readonly #base: URL;
  readonly #mod: typeof http | typeof https;
  readonly #agent: http.Agent;

  constructor(options: ClientOptions = {}) {
    this.url = (options.url || process.env.BRIG_URL || DEFAULT_URL).replace(/\/+$/, "");
    this.#base = new URL(this.url);
    if (this.#base.protocol !== "http:" && this.#base.protocol !== "https:")
      throw new TypeError(`brig URL must be http:// or https://, not ${this.url}`);
    this.#key = options.apiKey ?? defaultKey();
    this.#headers = { ...options.headers };
    this.#mod = this.#base.protocol === "https:" ? https : http;
    // Idle connections are closed after 30 s, well before brigd's own 120 s.
    this.#agent = new this.#mod.Agent({ keepAlive: true, timeout: 30_000 });
  }

  /** The client for the environment's brigd (BRIG_URL, BRIG_API_KEY), made once. */
  static default(): BrigClient {
    return (defaultClient ??= new BrigClient());
  }

  /** `options.client` if given, else a new client for `options`' url/key, else the default. */
  static from(options: ClientOptions & { client?: BrigClient } = {}): BrigClient {
    if (options.client) return options.client;
    if (options.url !== undefined || options.apiKey !== undefined || options.headers !== undefined)
      return new BrigClient(options);
    return BrigClient.default();
  }

  /** Closes idle connections; in-flight requests finish. */
  close(): void {
    this.#agent.destroy();
  }

  /** `GET /healthz`. */
  async health(): Promise<{ status: string; version: string; [key: string]: unknown }> {
    return this.json("GET", "/healthz");
  }

  /** `GET /v1/templates`. */
  async templates(): Promise<{ name: string; key: string; built: boolean }[]> {
    return (await this.json<{ templates: { name: string; key: string; built: boolean }[] }>("GET", "/v1/templates"))
      .templates;
  }

  /** `GET /v1/tariffs`: `{tariffs: [{name, vcpus, memory_mib, disk_mib, price_micro_usd_per_second}], default}`. */
  async tariffs(): Promise<{ tariffs: Record<string, unknown>[]; default: string }> {
    return this.json("GET", "/v1/tariffs");
  }

  /** `GET /v1/account`: the caller's account (balance, usage, limits), as brigd sends it. */
  async account(): Promise<Record<string, unknown>> {
    return this.json("GET", "/v1/account");
  }

  /**
   * `GET /v1/account/usage`: what the account spent on each of its last `days` UTC days
   * (1..366, default 30), oldest first, today last.
   */
  async usage(days = 30): Promise<UsageDay[]> {
    const r = await this.json<{ days: unknown[] }>("GET", "/v1/account/usage", { query: { days } });
    return r.days.map((d) => camel<UsageDay>(d));
  }

  /**
   * `GET /v1/account/ledger` (an admin key): one page of the account's credits and charges,
   * newest first, at most `limit` (1..1000, default 100) entries older than `before`.
   */
  async ledger(options: { limit?: number; before?: number } = {}): Promise<LedgerPage> {
    const r = await this.json<{ entries: unknown[]; next_before: number | null }>("GET", "/v1/account/ledger", {
      query: { limit: options.limit, before: options.before },
    });
    return { entries: r.entries.map((e) => camel<LedgerEntry>(e)), nextBefore: r.next_before };
  }

  /** Every entry of the ledger, newest first, fetched `page` entries at a time. */
  async *ledgerEntries(page = 1000): AsyncGenerator<LedgerEntry> {
    let before: number | undefined;
    for (;;) {
      const p = await this.ledger({ limit: page, before });
      yield* p.entries;
      if (p.nextBefore === null) return;
      before = p.nextBefore;
    }
  }

  /** `GET /v1/accounts` (the operator key): every account as `account()` shows one, oldest first. */
  async accounts(): Promise<Record<string, unknown>[]> {
    return (await this.json<{ accounts: Record<string, unknown>[] }>("GET", "/v1/accounts")).accounts;
  }

  /** `GET /v1/projects/{id}/injections` (an admin key): the project's credential injection rules. */
  async injectionRules(project: string): Promise<InjectionRule[]> {
    return (await this.json<{ rules: InjectionRule[] }>("GET", `/v1/projects/${encodeURIComponent(project)}/injections`))
      .rules;
  }

  /**
   * `PUT /v1/projects/{id}/injections` (an admin key): replaces the project's rules,
   * applied to its running sandboxes at once; returns them as stored. A bad rule is an
   * InvalidRequestError.
   */
  async setInjectionRules(project: string, rules: InjectionRule[]): Promise<InjectionRule[]> {
    if (!Array.isArray(rules)) throw new TypeError("rules: an array of rules");
    const path = `/v1/projects/${encodeURIComponent(project)}/injections`;
    return (await this.json<{ rules: InjectionRule[] }>("PUT", path, { json: { rules } })).rules;
  }

  /** Removes every injection rule of the project (an admin key). */
  async deleteInjectionRules(project: string): Promise<void> {
    await this.setInjectionRules(project, []);
  }

  /**
   * Sends a request and returns the response once its headers arrived; a
   * non-2xx answer is read and thrown as a BrigError.  The caller consumes (or
   * destroys) the body of what is returned.
   */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const url = new URL(this.#base.pathname.replace(/\/$/, "") + path, this.#base);
    for (const [k, v] of Object.entries(options.query ?? {}))
      if (v !== undefined) url.searchParams.set(k, typeof v === "boolean" ? (v ? "1" : "0") : String(v));
    const headers: Record<string, string> = { ...this.#headers, ...options.headers };
    if (this.#key) headers.authorization = `Bearer ${this.#key}`;
    let body: Uint8Array | string | AsyncIterable<Uint8Array | string> | undefined;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers["content-type"] = "application/json";
    } else if (options.body !== undefined) {
      body = await normalizeBody(options.body);
      headers["content-type"] ??= "application/octet-stream";
    }
    if (typeof body === "string") body = Buffer.from(body);
    if (body instanceof Uint8Array) headers["content-length"] = String(body.byteLength);
    else if (body === undefined && method !== "GET" && method !== "HEAD") headers["content-length"] = "0";

    let res: Response;
    try {
      res = await this.#send(url, method, headers, body, options.signal);
    } catch (e) {
      // A keep-alive connection the server closed meanwhile: a replayable
      // request is sent once more on a fresh one.
      if (!(e instanceof StaleSocket) || !(body === undefined || body instanceof Uint8Array)) throw unwrap(e, url);
      try {
        res = await this.#send(url, method, headers, body, options.signal);
      } catch (e2) {
        throw unwrap(e2, url);
      }
    }
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) return res;
    const text = (await readBody(res)).toString("utf8");
    throw errorFromBody(status, text);
  }

  /**
   * A request whose answer is JSON (or empty: then `undefined`).  Also the way
   * to any route the SDK has no method for (projects, keys, secrets, accounts):
   * `client.json("PATCH", "/v1/account", { json: { daily_limit_micro_usd: null } })`.
   */
  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const res = await this.request(method, path, options);
    const buf = await readBody(res);
    return (buf.length ? JSON.parse(buf.toString("utf8")) : undefined) as T;
  }

  #send(
    url: URL,
    method: string,
    headers: Record<string, string>,
    body: Uint8Array | AsyncIterable<Uint8Array | string> | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    return new Promise((resolve, reject) => {
      const req = this.#mod.request(url, { method, headers, agent: this.#agent, signal });
      let answered = false;
      req.on("response", (res) => {
        answered = true;
        resolve(res);
      });
      req.on("error", (err: NodeJS.ErrnoException) => {
        if (answered) return;
        reject(req.reusedSocket && err.code === "ECONNRESET" ? new StaleSocket(err) : err);
      });
      if (body === undefined || body instanceof Uint8Array) {
        req.end(body);
        return;
      }
      pump(req, body).catch((err) => req.destroy(err));
    });
  }
}

class StaleSocket extends Error {
  constructor(readonly original: Error) {
    super(original.message);
  }
}

function unwrap(e: unknown, url: URL): unknown {
  if (e instanceof StaleSocket) e = e.original;
  if (e instanceof BrigError || (e instanceof Error && e.name === "AbortError")) return e;
  const msg = e instanceof Error ? e.message : String(e);
  return new ConnectionError(`cannot reach brigd at ${url.origin}: ${msg}`, { code: "connection", cause: e });
}

async function normalizeBody(b: BodyInit): Promise<Uint8Array | string | AsyncIterable<Uint8Array | string>> {
  if (typeof b === "string" || b instanceof Uint8Array) return b;
  if (b instanceof ArrayBuffer) return new Uint8Array(b);
  if (typeof Blob !== "undefined" && b instanceof Blob) return new Uint8Array(await b.arrayBuffer());
  if (typeof (b as AsyncIterable<Uint8Array>)[Symbol.asyncIterator] === "function")
    return b as AsyncIterable<Uint8Array | string>;
  if (typeof (b as ReadableStream<Uint8Array>).getReader === "function") return readerChunks(b as ReadableStream<Uint8Array>);
  throw new TypeError("body must be a string, Uint8Array, ArrayBuffer, Blob or a stream of bytes");
}

async function* readerChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** Writes a stream body with back-pressure; stops quietly when the request is gone. */
async function pump(req: http.ClientRequest, src: AsyncIterable<Uint8Array | string>): Promise<void> {
  for await (const chunk of src) {
    if (req.destroyed) return;
    if (!req.write(chunk)) {
      await new Promise<void>((resolve) => {
        const go = () => {
          req.off("drain", go);
          req.off("close", go);
          resolve();
        };
        req.on("drain", go);
        req.on("close", go);
      });
      if (req.destroyed) return;
    }
  }
  req.end();
}

/** The whole body as one Buffer. */
export async function readBody(res: Response): Promise<Buffer> {
  const chunks: Buffer[] = [];
  try {
    for await (const c of res) chunks.push(c as Buffer);
  } catch (e) {
    throw broken(e);
  }
  return Buffer.concat(chunks);
}

/** A response body that broke off (brigd or the connection went away). */
function broken(e: unknown): unknown {
  if (e instanceof Error && e.name === "AbortError") return e;
  const msg = e instanceof Error ? e.message : String(e);
  return new ConnectionError(`the answer from brigd broke off: ${msg}`, { code: "connection", cause: e });
}

/** The body as bytes (a plain Uint8Array view, not a Buffer). */
export async function readBytes(res: Response): Promise<Uint8Array> {
  const b = await readBody(res);
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

/**
 * The objects of an NDJSON body, each as soon as its line is complete.  Leaving
 * the loop early destroys the response (for a foreground exec: brigd then
 * kills the command).  Aborting `signal` (the request's) rejects with its reason.
 */
export async function* ndjson(res: Response, signal?: AbortSignal): AsyncGenerator<Record<string, unknown>> {
  let pending: Buffer = Buffer.alloc(0);
  let done = false;
  try {
    for await (const chunk of res) {
      pending = pending.length ? Buffer.concat([pending, chunk as Buffer]) : (chunk as Buffer);
      let nl: number;
      while ((nl = pending.indexOf(10)) >= 0) {
        const line = pending.subarray(0, nl).toString("utf8").trim();
        pending = pending.subarray(nl + 1);
        if (line) yield JSON.parse(line) as Record<string, unknown>;
      }
    }
    const rest = pending.toString("utf8").trim();
    if (rest) yield JSON.parse(rest) as Record<string, unknown>;
    done = true;
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    throw e instanceof SyntaxError ? e : broken(e);
  } finally {
    if (!done) res.destroy();
  }
}

/** Where a call goes: a client of its own, or options to make one (`BrigClient.from`). */
export type ConnectOptions = ClientOptions & { client?: BrigClient };
