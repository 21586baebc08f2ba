/** util.ts - small conversions between the API's JSON and the SDK's shapes. */
import { TextDecoder } from "node:util";
import type { FileMode } from "./types.js";

/** A copy of `obj` with top-level snake_case keys in camelCase (`exit_code` → `exitCode`). */
export function camel<T>(obj: unknown): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj as Record<string, unknown>))
    out[k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())] = v;
  return out as T;
}

/** Milliseconds as the API's seconds. */
export function seconds(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`a duration must be ≥ 0 ms, not ${ms}`);
  return ms / 1000;
}

/** `0o755` or `"0755"` as the API's octal text. */
export function octal(mode: FileMode): string {
  return typeof mode === "number" ? "0" + mode.toString(8) : mode;
}

/**
 * Turns one output stream's chunks into text: text chunks pass through, base64
 * chunks (output that is not valid UTF-8) are decoded, a character split
 * across base64 chunks is kept whole, and invalid bytes become U+FFFD.
 */
export class TextStream {
  #decoder: TextDecoder | undefined;

  push(data: string, encoding?: unknown): string {
    if (encoding === "base64") {
      this.#decoder ??= new TextDecoder();
      return this.#decoder.decode(Buffer.from(data, "base64"), { stream: true });
    }
    return this.flush() + data;
  }

  /** What a pending partial character decodes to at the end of the stream. */
  flush(): string {
    const d = this.#decoder;
    this.#decoder = undefined;
    return d ? d.decode() : "";
  }
}

/** A buffered answer's output field: text, or base64 when `<key>_encoding` says so. */
export function outputText(body: Record<string, unknown>, key: string): string {
  const v = typeof body[key] === "string" ? (body[key] as string) : "";
  if (body[`${key}_encoding`] !== "base64") return v;
  return new TextDecoder().decode(Buffer.from(v, "base64"));
}
