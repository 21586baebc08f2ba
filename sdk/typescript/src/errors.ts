/**
 * errors.ts - the typed errors of the SDK.
 *
 * Every failure of a brigd call is a BrigError carrying the HTTP status, the
 * API's error code and its message; the subclass says which kind it is, so a
 * caller can `catch (e) { if (e instanceof NotFoundError) … }`.  A command
 * that exits non-zero is NOT an error: exec() returns it as a result.
 */

export interface BrigErrorOptions {
  /** HTTP status; 0 when no answer came (connection failure, client-side timeout). */
  status?: number;
  /** The API's error code (`not_found`, `invalid_request`, …). */
  code?: string;
  cause?: unknown;
}

export class BrigError extends Error {
  /** HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The API's error code, e.g. `not_found`. */
  readonly code: string;

  constructor(message: string, options: BrigErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = options.status ?? 0;
    this.code = options.code ?? "error";
  }
}

/** 400 `invalid_request`: malformed or refused input (unknown field, relative path, bad cwd…). */
export class InvalidRequestError extends BrigError {}
/** 405 `method_not_allowed`: the route exists with another method (brigd older than the SDK). */
export class MethodNotAllowedError extends InvalidRequestError {}
/** 401 `unauthorized`: missing or unknown API key. */
export class AuthError extends BrigError {}
/** 403 `forbidden`: the key may not do this, or permission denied inside the sandbox. */
export class ForbiddenError extends BrigError {}
/** 404 `not_found`: no such sandbox, process or file. */
export class NotFoundError extends BrigError {}
/** 409 `conflict`: the target exists, a directory is not empty, a template is not built, or the
 * sandbox ended (deleted, timed out) while the request ran. */
export class ConflictError extends BrigError {}
/** 413 `too_large`: a body over the server's limit. */
export class TooLargeError extends BrigError {}
/** 429 or a limit code: a spending, concurrency or rate limit refused the call. */
export class LimitExceededError extends BrigError {}
/** 402 `payment_required`: the prepaid balance is used up. */
export class PaymentRequiredError extends LimitExceededError {}
/** 5xx (`internal`): brigd or the runtime failed. */
export class ServerError extends BrigError {}
/** 502 `agent_protocol`: the sandbox's agent answered something malformed. */
export class AgentProtocolError extends ServerError {}
/** 503 `unavailable`: the sandbox's agent does not answer. */
export class UnavailableError extends ServerError {}
/** 507 `no_space`: the sandbox's disk is full. */
export class NoSpaceError extends ServerError {}
/** brigd could not be reached, or the connection broke before an answer. */
/**
 * 422 `build_failed`: a step of `Template.build` exited non-zero: which (`step`, from 1;
 * `kind`: apt, pip, npm or run), its `command`, `exitCode` and `outputTail` (its last 4 KiB).
 */
export class BuildFailedError extends BrigError {
  step = 0;
  kind = "";
  command = "";
  exitCode = 0;
  outputTail = "";
  steps: Record<string, unknown>[] = [];
}
export class ConnectionError extends BrigError {}
/** A client-side deadline passed (e.g. `Process.wait({timeoutMs})` while it still runs). */
export class TimeoutError extends BrigError {}

const STATUS_OF_CODE: Record<string, number> = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  too_large: 413,
  internal: 500,
  agent_protocol: 502,
  unavailable: 503,
  no_space: 507,
  build_failed: 422,
};

const LIMIT_CODES = new Set([
  "limit_exceeded",
  "quota_exceeded",
  "rate_limited",
  "spend_limit",
  "concurrency_limit",
]);

/**
 * The error for an API answer: `status` as received (or 0 for an error event
 * in a stream, which has only a code: its status is then derived from it).
 */
export function apiError(status: number, code: string, message: string): BrigError {
  if (status === 0) status = STATUS_OF_CODE[code] ?? 500;
  const opts = { status, code };
  if (status === 402 || code === "payment_required") return new PaymentRequiredError(message, opts);
  if (status === 429 || LIMIT_CODES.has(code)) return new LimitExceededError(message, opts);
  switch (status) {
    case 400:
      return new InvalidRequestError(message, opts);
    case 405:
      return new MethodNotAllowedError(message, opts);
    case 401:
      return new AuthError(message, opts);
    case 403:
      return new ForbiddenError(message, opts);
    case 404:
      return new NotFoundError(message, opts);
    case 409:
      return new ConflictError(message, opts);
    case 413:
      return new TooLargeError(message, opts);
    case 422:
      return new BuildFailedError(message, opts);
    case 502:
      return new AgentProtocolError(message, opts);
    case 503:
      return new UnavailableError(message, opts);
    case 507:
      return new NoSpaceError(message, opts);
  }
  if (status >= 500) return new ServerError(message, opts);
  return new BrigError(message, opts);
}

/** The error for a non-2xx answer whose body is (normally) `{"error": {code, message}}`. */
export function errorFromBody(status: number, body: string): BrigError {
  let code = "http_" + status;
  let message = body.slice(0, 500) || `HTTP ${status}`;
  let build: Record<string, unknown> | undefined;
  try {
    const whole = JSON.parse(body) as { error?: { code?: unknown; message?: unknown }; build?: unknown };
    const err = whole.error;
    if (err && typeof err.code === "string") code = err.code;
    if (err && typeof err.message === "string") message = err.message;
    if (whole.build && typeof whole.build === "object") build = whole.build as Record<string, unknown>;
  } catch {
    /* not JSON (a proxy's page): keep the raw text */
  }
  const e = apiError(status, code, message);
  if (e instanceof BuildFailedError && build) {
    e.step = Number(build.step ?? 0);
    e.kind = String(build.kind ?? "");
    e.command = String(build.command ?? "");
    e.exitCode = Number(build.exit_code ?? 0);
    e.outputTail = String(build.output_tail ?? "");
    e.steps = Array.isArray(build.steps) ? (build.steps as Record<string, unknown>[]) : [];
  }
  return e;
}
