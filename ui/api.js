// api.js - the only way the dashboard reaches brigd: the public REST API, with the key the user
// signed in with in the Authorization header (never in a URL), kept in sessionStorage only.
const KEY = "brig.key";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  set: (k) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
  onUnauthorized: () => {},
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(extra) {
  const h = { Authorization: "Bearer " + (session.key() || ""), ...extra };
  return h;
}

async function check(r) {
  if (r.ok) return r;
  let e = null;
  try {
    e = (await r.json()).error;
  } catch {
    /* not JSON */
  }
  if (r.status === 401) session.onUnauthorized();
  throw new ApiError(r.status, e?.code || "http_" + r.status, e?.message || r.statusText);
}

/** One JSON call: the answer's JSON, null for an empty one; ApiError on an error status. */
export async function api(method, path, body, { signal } = {}) {
  const init = { method, headers: headers(), signal, cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await check(await fetch(path, init));
  if (r.status === 204) return null;
  const text = await r.text();
  return text ? JSON.parse(text) : null;
}

/** A POST of raw bytes (a process's stdin): the answer's JSON. */
export async function postBytes(path, bytes) {
  const init = { method: "POST", headers: headers({ "Content-Type": "application/octet-stream" }), body: bytes, cache: "no-store" };
  return (await check(await fetch(path, init))).json();
}

/** The raw response of a GET (downloads, the Prometheus text). */
export async function raw(path, { signal } = {}) {
  return check(await fetch(path, { headers: headers(), signal, cache: "no-store" }));
}

/** Each object of an NDJSON answer (a followed timeline) as it arrives; ends with the stream. */
export async function* ndjson(path, { signal } = {}) {
  const r = await raw(path, { signal });
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) yield JSON.parse(line);
    }
  }
  if (buf.trim()) yield JSON.parse(buf);
}

/** Who the key is: {scope: "operator"|"admin"|"sandbox", account}.  The API has no "who am I":
 * the operator key is refused the account (403), a sandbox key the secrets (403). */
export async function whoami() {
  let account;
  try {
    account = await api("GET", "/v1/account");
  } catch (e) {
    if (e.status === 403) return { scope: "operator", account: null };
    throw e;
  }
  try {
    await api("GET", `/v1/projects/${encodeURIComponent(account.default_project_id)}/secrets`);
    return { scope: "admin", account };
  } catch (e) {
    if (e.status === 403) return { scope: "sandbox", account };
    throw e;
  }
}
