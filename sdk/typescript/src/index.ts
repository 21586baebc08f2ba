/**
 * @brig/sdk - TypeScript SDK for brig, a self-hosted sandbox service for AI agents.
 *
 *   import { Sandbox } from "@brig/sdk";
 *   await using sb = await Sandbox.create({ template: "base" });
 *   const r = await sb.exec("python3 -c 'print(6*7)'");
 *   console.log(r.exitCode, r.stdout);
 */
export { Sandbox } from "./sandbox.js";
export type { ConnectOptions } from "./sandbox.js";
export { Volume } from "./volume.js";
export { Template } from "./template.js";
export type { BuildOptions, TemplateSpec } from "./template.js";
export type { VolumeOptions } from "./volume.js";
export { Process } from "./process.js";
export type { OutputOptions } from "./process.js";
export { BrigClient } from "./client.js";
export type { BodyInit, ClientOptions } from "./client.js";
export {
  AgentProtocolError,
  AuthError,
  BrigError,
  BuildFailedError,
  ConflictError,
  ConnectionError,
  ForbiddenError,
  InvalidRequestError,
  LimitExceededError,
  MethodNotAllowedError,
  NoSpaceError,
  NotFoundError,
  PaymentRequiredError,
  ServerError,
  TimeoutError,
  TooLargeError,
  UnavailableError,
} from "./errors.js";
export type { BrigErrorOptions } from "./errors.js";
export type {
  CreateOptions,
  Credential,
  ExecOptions,
  ExecReason,
  ExecResult,
  FileEntry,
  FileMode,
  InjectionRule,
  Isolation,
  LedgerEntry,
  LedgerPage,
  ProcessEvent,
  ProcessInfo,
  PtySize,
  SandboxEndReason,
  SandboxInfo,
  UsageDay,
  VolumeInfo,
  VolumeMount,
} from "./types.js";
