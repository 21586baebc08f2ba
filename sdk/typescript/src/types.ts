/**
 * types.ts - the shapes the SDK hands out and takes in.  Times in the API are
 * seconds; in this SDK every duration is in milliseconds (`…Ms`).
 */

/**
 * A sandbox as brigd describes it (`GET /v1/sandboxes/{id}`), keys in camelCase.
 * After it ended, brigd keeps answering for a retention period (7 days by
 * default) with `state: "deleted"`, the `reason`, `deletedAt` and the cost.
 */
export interface SandboxInfo {
  id: string;
  template: string;
  /** `running`, or `deleted` once it ended. */
  state: string;
  /** ISO 8601. */
  createdAt: string;
  projectId?: string;
  tariff?: string;
  /** `container`, `gvisor` or `microvm`: the boundary between the sandbox and the host's kernel. */
  isolation?: Isolation;
  /** Names of the sandbox's environment variables (never their values). */
  env?: string[];
  /** Names of its secrets (never their values). */
  secrets?: string[];
  /** How long without API use before it is deleted (brigd's `idle_timeout`, in ms). */
  idleTimeoutMs?: number;
  /** What its idle timeout does: `delete` it or `pause` it. */
  /** While paused: `resident` (frozen, memory kept) or `checkpoint` (gVisor: on disk). */
  memory?: "resident" | "checkpoint";
  onIdle?: "delete" | "pause";
  /** Its maximum lifetime, when brigd reports one (`max_lifetime`, in ms). */
  maxLifetimeMs?: number;
  priceMicroUsdPerSecond?: number;
  /** When it will be deleted whatever it does (ISO 8601). */
  expiresAt?: string;
  /** When it will be deleted if unused until then (ISO 8601). */
  idleExpiresAt?: string;
  /** Why it ended, the detail: `deleted_by_api`, `idle_timeout`, `max_lifetime`, `cpu_abuse`, `tcp_memory`, `balance_exhausted`, `spend_limit`, `agent_lost`, `oom_killed`, `lost_on_restart`, `destroyed_by_operator`, `host_reboot`. */
  reason?: string;
  /** Why it ended, typed (docs/api.md "Why it ended"). */
  endReason?: SandboxEndReason;
  deletedAt?: string;
  /** What it cost, in micro-dollars (integer), and formatted (`"$0.000600"`). */
  costMicroUsd?: number;
  cost?: string;
  /** Fields brigd adds later appear here in camelCase too. */
  [key: string]: unknown;
}

/** What the account spent on one UTC day (`GET /v1/account/usage`). */
export interface UsageDay {
  /** `YYYY-MM-DD`. */
  date: string;
  spentMicroUsd: number;
  /** Formatted: `"$0.000600"`. */
  spent: string;
}

/** One entry of the account's ledger (`GET /v1/account/ledger`). */
export interface LedgerEntry {
  seq: number;
  /** ISO 8601. */
  at: string;
  kind: "credit" | "charge";
  amountMicroUsd: number;
  /** Formatted: `"$0.000600"`. */
  amount: string;
  /** A charge's sandbox; `null` for a credit. */
  sandboxId: string | null;
  /** The seconds a charge covers; `null` for a credit. */
  seconds: number | null;
  note: string | null;
  [key: string]: unknown;
}

/** One page of the ledger, newest first; `nextBefore` is the next page's `before` (`null`: the last). */
export interface LedgerPage {
  entries: LedgerEntry[];
  nextBefore: number | null;
}

/** Where a sandbox mounts a volume of its project. */
export interface VolumeMount {
  name: string;
  /** Absolute, inside the sandbox. */
  path: string;
  readOnly?: boolean;
}

/** A volume as brigd describes it (`GET /v1/volumes/{name}`), keys in camelCase. */
export interface VolumeInfo {
  id: string;
  name: string;
  projectId: string;
  sizeMib: number;
  /** ISO 8601. */
  createdAt: string;
  /** What it cost so far, in micro-dollars, and formatted. */
  costMicroUsd: number;
  cost: string;
  priceMicroUsdPerGibHour: number;
  /** The sandboxes that mount it now (until their teardown is done). */
  mountedBy: { sandboxId: string; path: string; readOnly: boolean }[];
  [key: string]: unknown;
}

/**
 * How a sandbox is kept from the host: `container` (the host's kernel under
 * namespaces and a seccomp allow-list), `gvisor` (a user-space kernel of its own) or
 * `microvm` (a virtual machine with its own kernel; needs hardware KVM, or an operator's
 * `microvm_accel = tcg`).
 */
export type Isolation = "container" | "gvisor" | "microvm";

export interface CreateOptions {
  /** The template to start from (`base`: Python 3 + Node.js 22; `minimal`: busybox). brigd's default: `base`. */
  template?: string;
  /** The tariff (`small`, `medium`, `large`, as configured). */
  tariff?: string;
  /** Environment variables for every command in the sandbox. */
  env?: Record<string, string>;
  /** Secret environment variables: sealed at rest, redacted from output as `[REDACTED:NAME]`, never returned (values ≥ 4 bytes). */
  secrets?: Record<string, string>;
  /** Names of the project's stored secrets to pass in (sent as `secret_refs`). */
  secretRefs?: string[];
  /** The project (`prj_…`) to create it in; an admin key may choose, a sandbox key has its own. */
  project?: string;
  /**
   * `container`, `gvisor` or `microvm`; default: the project's default, else the operator's.  A mode
   * the project does not allow throws ForbiddenError; one the host cannot run,
   * InvalidRequestError (naming what is missing) — brigd never swaps in another.
   */
  isolation?: Isolation;
  /**
   * Volumes of the project to mount (an admin key): `vol.mount("/data")`, `{ name, path, readOnly }`
   * or `"name:/path[:ro]"`.  One sandbox writes a volume at a time, or many read it (ConflictError
   * otherwise); see docs/volumes.md.
   */
  volumes?: (VolumeMount | string)[];
  /** Start from this snapshot's file system (`snp_…`, from `sb.snapshot()`; docs/snapshots.md): a damaged one throws ConflictError. */
  snapshot?: string;
  /** Delete the sandbox after this long without API use and no command running (brigd's default: 5 min). */
  idleTimeoutMs?: number;
  /**
   * What the idle timeout does: `"delete"` the sandbox, or `"pause"` it (resume with
   * `sb.resume()`; deleted once paused for brigd's `paused_max_age`).  Default: its project's,
   * else delete (docs/snapshots.md).
   */
  onIdle?: "delete" | "pause";
  /**
   * gVisor: `true` makes it a sandbox that can be snapshotted and forked (its writes go to the
   * host's layer, slower on file-heavy work; docs/snapshots.md).
   */
  snapshots?: boolean;
  /** Delete the sandbox this long after creation, whatever it does (brigd's default: 1 h). */
  maxLifetimeMs?: number;
  signal?: AbortSignal;
}

/** Why a command ended: its own exit, a signal, its timeout, or one of the sandbox's limits
 * (the cgroup's OOM killer, the pids limit, a full disk). */
export type ExecReason = "exited" | "signal" | "timeout" | "oom_killed" | "pids_limit" | "disk_full";

/** Why a sandbox ended (docs/api.md "Why it ended"). */
export type SandboxEndReason =
  | "deleted" | "idle" | "lifetime" | "cpu_abuse" | "tcp_memory" | "balance" | "spend_limit"
  | "agent_lost" | "oom_killed" | "brigd_restart" | "host_shutdown" | "create_failed";

/** The outcome of a foreground command. A non-zero `exitCode` is a result, not an error. */
export interface ExecResult {
  /** The exit status; `128 + n` when killed by signal `n`; 137 after a timeout; 127: no such program. */
  exitCode: number;
  stdout: string;
  stderr: string;
  /** The command ran out of time and was killed. */
  timedOut: boolean;
  durationMs: number;
  /** The signal that killed it, or null. */
  signal: number | null;
  /** Why it ended (null from a brigd that does not say). */
  reason: ExecReason | null;
  /** Output beyond the kept limit (10 MiB per stream by default) was dropped. */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

export interface PtySize {
  cols: number;
  rows: number;
}

export interface ExecOptions {
  /** Kill the command after this long; 0: no limit. brigd's default is 55 s (background: none). */
  timeoutMs?: number;
  /** Working directory (absolute); default `/root`. */
  cwd?: string;
  /** Added to the default environment. */
  env?: Record<string, string>;
  /** `root` (default) or another account of the template (`user`). */
  user?: string;
  /** Bytes for the command's stdin; without it stdin is empty. */
  stdin?: string | Uint8Array;
  /** Run on a pseudo-terminal; stdout and stderr are then one stream (stdout). */
  pty?: PtySize;
  /** Called with each piece of stdout as it is produced (streams the command). */
  onStdout?: (data: string) => void;
  /** Called with each piece of stderr as it is produced (streams the command). */
  onStderr?: (data: string) => void;
  /** Aborting kills the command (streams the command); exec() then rejects with an AbortError. */
  signal?: AbortSignal;
  /** Start in the background and return a Process handle at once. */
  background?: boolean;
  /** Background/streamed commands: how much recent output brigd keeps (default 4 MiB). */
  bufferBytes?: number;
  /**
   * Per-step credentials for the egress proxy to inject (docs/secrets.md): a name to
   * a TTL in seconds (the project's secret of that name) or to `{ ttlSeconds, execOnly,
   * value }` (`execOnly`: for this exec only; `value`: a value for this grant only). The
   * command holds a placeholder; a rule of the
   * project must use the name.
   */
  credentials?: Record<string, number | Credential>;
}

/** A per-step credential of an exec (`ExecOptions.credentials`). */
export interface Credential {
  /** How long it is injected; optional with `execOnly` (then it ends it sooner). */
  ttlSeconds?: number;
  /** Injected only while this exec runs (not for a background command). */
  execOnly?: boolean;
  /** A value for this grant only; without it, the project's secret of the name. */
  value?: string;
}

/**
 * A credential injection rule of a project (docs/secrets.md): requests from its
 * sandboxes toward `host` (an exact lower-case name or `*.suffix`) get `headers`,
 * whose values may name secrets as `{{secret:NAME}}`.
 */
export interface InjectionRule {
  host: string;
  headers: Record<string, string>;
}

/** A process (background or not) as brigd describes it, keys in camelCase. */
export interface ProcessInfo {
  pid: number;
  argv: string[] | null;
  cmd: string | null;
  pty: boolean;
  background: boolean;
  user: string;
  startedAt: string | null;
  running: boolean;
  exitCode: number | null;
  signal: number | null;
  timedOut: boolean;
  /** Why it ended; null while it runs. */
  reason: ExecReason | null;
  endedAt: string | null;
  /** Output that fell out of the buffer before anyone read it. */
  droppedBytes: number;
  [key: string]: unknown;
}

/** One event of a process's output stream. */
export type ProcessEvent =
  | { type: "stdout" | "stderr"; data: string }
  /** Output this reader missed (it fell out of brigd's buffer). */
  | { type: "dropped"; bytes: number }
  | { type: "exit"; exitCode: number; signal: number | null; timedOut: boolean; durationMs?: number; reason: ExecReason | null };

/** A directory entry or `stat` result. */
export interface FileEntry {
  name: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  /** Octal permission bits, e.g. `"0644"`. */
  mode: string;
  /** ISO 8601. */
  mtime: string;
  /** Symlinks: where they point. */
  target?: string;
}

/** Octal permission bits: `0o755` or `"0755"`. */
export type FileMode = number | string;
