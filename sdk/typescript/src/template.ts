/**
 * template.ts - the Template class: one of the account's own templates, built from a
 * spec inside a sandbox of its parent (docs/templates.md, "Templates declared by users").
 *
 *   const t = await Template.build("py-api", { from: "base", pip: ["/w/mylib.whl"],
 *     files: { "/w/mylib.whl": wheelBytes }, run: ["python3 -c 'import mylib'"] });
 *   await using sb = await Sandbox.create({ template: t.ref });
 *
 * The same spec on the same parent is built once (`t.cached` on a later build); a step
 * that exits non-zero rejects with BuildFailedError (the step, its exit code, its
 * output's tail).
 */
import { BrigClient, ndjson, readBody } from "./client.js";
import type { ConnectOptions } from "./client.js";
import { BrigError, NotFoundError, errorFromBody } from "./errors.js";

type Bytes = string | Uint8Array;

/** POST /v1/templates's fields but `name` (docs/templates.md). */
export interface TemplateSpec {
  tag?: string;
  from?: string;
  apt?: string[];
  pip?: string[];
  npm?: string[];
  /** Absolute path → content, or `{content, mode}`. */
  files?: Record<string, Bytes | { content: Bytes; mode?: number }>;
  run?: string[];
  env?: Record<string, string>;
  workdir?: string;
  start?: string;
  ready?: { command?: string; port?: number; timeout?: number };
}

/** Template.build's options: where brigd is, and `onLog` to follow the build's log. */
export interface BuildOptions extends ConnectOptions {
  /** Gets the build's log as the build writes it (whole lines; `POST /v1/templates?wait=0`,
   * then the build's `…/builds/ID?follow=1`); the outcome is the same as without it. */
  onLog?: (text: string) => void;
}

function b64(data: Bytes): string {
  return Buffer.from(typeof data === "string" ? Buffer.from(data, "utf8") : data).toString("base64");
}

export class Template {
  readonly client: BrigClient;
  /** brigd's answer: name, tag, ref, key, parent, size_bytes, built_at, built_by… */
  readonly info: Record<string, unknown>;

  /** @internal Use `Template.build` or `Template.get`. */
  constructor(client: BrigClient, info: Record<string, unknown>) {
    this.client = client;
    this.info = info;
  }

  /** `name:tag`: what `Sandbox.create({template})` names. */
  get ref(): string {
    return String(this.info.ref ?? this.info.name);
  }

  get key(): string {
    return String(this.info.key);
  }

  /** Whether it was built before (the same spec on the same parent): nothing was built. */
  get cached(): boolean {
    return this.info.cached === true;
  }

  /** Builds it (or finds it built); resolves when the build ended. */
  static async build(name: string, spec: TemplateSpec = {}, options: BuildOptions = {}): Promise<Template> {
    const body: Record<string, unknown> = { ...spec, name };
    if (spec.files) {
      body.files = Object.entries(spec.files).map(([path, v]) => {
        const f = typeof v === "string" || v instanceof Uint8Array ? { content: v } : v;
        const out: Record<string, unknown> = { path, content_b64: b64(f.content) };
        if (f.mode !== undefined) out.mode = f.mode;
        return out;
      });
    }
    const client = BrigClient.from(options);
    if (!options.onLog) return new Template(client, await client.json("POST", "/v1/templates", { json: body }));
    const res = await client.request("POST", "/v1/templates", { json: body, query: { wait: "0" } });
    const first = JSON.parse((await readBody(res)).toString("utf8")) as Record<string, unknown>;
    if (res.statusCode !== 202) return new Template(client, first); // built before
    let end: Record<string, unknown> | undefined;
    const events = await client.request("GET", String(res.headers.location), { query: { follow: "1" } });
    for await (const ev of ndjson(events)) {
      if (ev.type === "log") options.onLog(String(ev.data ?? ""));
      else if (ev.type === "end") end = ev;
    }
    if (!end) throw new BrigError("the build's log ended before its end event", { code: "connection" });
    const result = end.result as Record<string, unknown> | null;
    if (end.state === "succeeded" && result) return new Template(client, result);
    const why = result ?? { error: { code: null, message: String(end.error ?? "the build failed") } };
    throw errorFromBody(Number(end.status ?? 500), JSON.stringify(why));
  }

  /** The account's template `name[:tag]`; NotFoundError when it has none. */
  static async get(ref: string, options: ConnectOptions = {}): Promise<Template> {
    const client = BrigClient.from(options);
    return new Template(client, await client.json("GET", templatePath(ref)));
  }

  /** Its build's steps: command, exit_code, duration_ms, output (its last 4 KiB). */
  async log(): Promise<Record<string, unknown>[]> {
    return (await this.client.json<{ steps: Record<string, unknown>[] }>("GET", templatePath(this.ref) + "/log"))
      .steps;
  }

  /** Deletes it; ConflictError while sandboxes of it run. */
  async delete(options: { missingOk?: boolean } = {}): Promise<void> {
    try {
      await this.client.json("DELETE", templatePath(this.ref));
    } catch (e) {
      if (!(options.missingOk && e instanceof NotFoundError)) throw e;
    }
  }
}

function templatePath(ref: string): string {
  return `/v1/templates/${encodeURIComponent(ref).replace(/%3A/g, ":")}`;
}
