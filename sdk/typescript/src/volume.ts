/**
 * volume.ts - the Volume class: a project's named file system of a bounded size,
 * mounted into sandboxes at their create, outliving them (docs/volumes.md).
 *
 *   const vol = await Volume.create("data", 1024);
 *   await using sb = await Sandbox.create({ volumes: [vol.mount("/data")] });
 *   ...
 *   await vol.delete(); // ConflictError while a sandbox mounts it
 *
 * Making, mounting and deleting volumes takes an admin key; a sandbox key lists
 * and reads its project's.
 */
import { BrigClient } from "./client.js";
import { NotFoundError } from "./errors.js";
import type { ConnectOptions } from "./client.js";
import type { VolumeInfo, VolumeMount } from "./types.js";
import { camel } from "./util.js";

/** Which project (`prj_…`) a call is about: another of the account's (an admin key); default the key's. */
export type VolumeOptions = ConnectOptions & { project?: string };

export class Volume {
  readonly id: string;
  readonly name: string;
  readonly client: BrigClient;
  /** The last state seen (from create, get or refresh). */
  info: VolumeInfo;

  /** @internal Use `Volume.create` or `Volume.get`. */
  constructor(client: BrigClient, info: VolumeInfo) {
    this.client = client;
    this.info = info;
    this.id = info.id;
    this.name = info.name;
  }

  /**
   * A new, empty volume of `sizeMib` MiB (16 up to brigd's `volume_max_mib`).
   * ConflictError for a name the project has; NoSpaceError when the host's disk
   * budget is full; LimitExceededError past the account's volumes' total.
   */
  static async create(name: string, sizeMib: number, options: VolumeOptions = {}): Promise<Volume> {
    const client = BrigClient.from(options);
    const body: Record<string, unknown> = { name, size_mib: sizeMib };
    if (options.project !== undefined) body.project = options.project;
    return new Volume(client, volumeInfo(await client.json("POST", "/v1/volumes", { json: body })));
  }

  /** A volume by name or id; NotFoundError when there is none. */
  static async get(name: string, options: VolumeOptions = {}): Promise<Volume> {
    const client = BrigClient.from(options);
    return new Volume(client, volumeInfo(await client.json("GET", volumePath(name, options.project))));
  }

  /** The caller's volumes: a sandbox key's project's, an admin key's account's (or `project`'s). */
  static async list(options: VolumeOptions = {}): Promise<VolumeInfo[]> {
    const q = options.project ? `?project=${encodeURIComponent(options.project)}` : "";
    const r = await BrigClient.from(options).json<{ volumes: unknown[] }>("GET", `/v1/volumes${q}`);
    return r.volumes.map((v) => volumeInfo(v));
  }

  /** An entry of `Sandbox.create`'s `volumes`. */
  mount(path: string, options: { readOnly?: boolean } = {}): VolumeMount {
    return { name: this.name, path, readOnly: options.readOnly ?? false };
  }

  /** Fetches it again: who mounts it now, what it cost. */
  async refresh(): Promise<VolumeInfo> {
    return (this.info = volumeInfo(await this.client.json("GET", volumePath(this.id, this.info.projectId))));
  }

  /** Deletes it and its data for good; ConflictError while a sandbox mounts it. */
  async delete(options: { missingOk?: boolean } = {}): Promise<void> {
    try {
      await this.client.json("DELETE", volumePath(this.id, this.info.projectId));
    } catch (e) {
      if (!(options.missingOk && e instanceof NotFoundError)) throw e;
    }
  }
}

function volumePath(name: string, project: string | undefined): string {
  const q = project ? `?project=${encodeURIComponent(project)}` : "";
  return `/v1/volumes/${encodeURIComponent(name)}${q}`;
}

function volumeInfo(json: unknown): VolumeInfo {
  const info = camel<VolumeInfo>(json);
  const users = (json as { mounted_by?: unknown[] }).mounted_by;
  info.mountedBy = Array.isArray(users) ? users.map((u) => camel(u)) : [];
  return info;
}

/** The API's `volumes` of a create from `VolumeMount`s or `"name:/path[:ro]"` strings. */
export function volumeMounts(volumes: (VolumeMount | string)[]): Record<string, unknown>[] {
  return volumes.map((v) => {
    if (typeof v !== "string") return { name: v.name, path: v.path, read_only: v.readOnly ?? false };
    const colon = v.indexOf(":");
    let path = colon > 0 ? v.slice(colon + 1) : "";
    const readOnly = path.endsWith(":ro");
    if (readOnly || path.endsWith(":rw")) path = path.slice(0, -3);
    if (!path.startsWith("/")) throw new TypeError(`a volume is "NAME:/PATH[:ro]", not "${v}"`);
    return { name: v.slice(0, colon), path, read_only: readOnly };
  });
}
