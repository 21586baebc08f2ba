// dashboard.test.mjs - the dashboard (/ui/) in Debian's headless Chromium, driven by
// playwright-core, against one real brigd: sign-in, the sandbox list, one sandbox's live
// timeline, egress as admin and as a sandbox key, money, host, deletion, accessibility, and
// the security of the pages (no data without a key, CSP, XSS planted through the API).
// Screenshots of each page go to build/ui-screenshots/ (BRIG_UI_SHOTS overrides).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { REPO, client, startBrigd } from "./brigd.mjs";

const SHOTS = process.env.BRIG_UI_SHOTS || join(REPO, "build/ui-screenshots");
const CHROMIUM = process.env.BRIG_CHROMIUM || "/usr/bin/chromium";
const T = 20000; // ms for anything the page waits on (a refresh is 3 s, a metrics sample 1 s)
const XSS = `<script>window.__xss=1</script>"'`;
const XSS_FILE = `<img src=x onerror="window.__xss=2">'.txt`;

/** The status of a GET of path exactly as written (node:http does not normalise it). */
function rawStatus(base, path) {
  return new Promise((resolve, reject) => {
    const u = new URL(base);
    http.get({ host: u.hostname, port: u.port, path }, (r) => {
      r.resume();
      resolve(r.statusCode);
    }).on("error", reject);
  });
}

describe("dashboard", () => {
  let brigd, browser, page, sid, logStart, sandboxKey;
  const problems = []; // dialogs, page errors, console errors: none may happen
  const urls = [];

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    brigd = await startBrigd("metrics_interval = 1\nbilling_interval = 1\n");
    logStart = brigd.log().length; // brigd prints the admin key it created, once, at its first start
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(T);
    page.on("dialog", (d) => {
      problems.push("dialog: " + d.message());
      d.dismiss();
    });
    page.on("pageerror", (e) => problems.push("page error: " + e.message));
    // An API refusal (401, 403, 404) the page shows is logged by Chromium too; nothing else may be.
    page.on("console", (m) => m.type() === "error" && !/^Failed to load resource: the server responded with a status of 40[134]/.test(m.text()) &&
      problems.push("console: " + m.text()));
    page.on("request", (r) => urls.push(r.url()));
  });

  after(async () => {
    await browser?.close();
    const left = await brigd?.stop();
    assert.deepEqual(left ?? [], [], "tests left sandboxes behind");
  });

  const shot = (name) => page.screenshot({ path: join(SHOTS, name + ".png"), fullPage: true });
  const go = (hash) => page.goto(`${brigd.url}/ui/${hash}`);
  async function signIn(key) {
    await page.getByLabel("API key").fill(key);
    await page.getByLabel("API key").press("Enter");
  }
  // The terminal's screen, one string per row (xterm.js's DOM renderer: one div a row).
  const screen = () => page.evaluate(() =>
    [...document.querySelectorAll(".terminal-box .xterm-rows > div")].map((d) => d.textContent.replace(/\u00a0/g, " ").trimEnd()));
  const waitScreen = (re) => page.waitForFunction((src) => [...document.querySelectorAll(".terminal-box .xterm-rows > div")]
    .some((d) => new RegExp(src).test(d.textContent.replace(/\u00a0/g, " ").trimEnd())), re.source);
  // Waits for the terminal's state line to read text; says what it read instead.
  const termState = (text) => page.getByText(text).waitFor().catch(async (e) => {
    throw new Error(`${e.message}\nthe terminal's state: ${await page.locator("#term-state").textContent()}`);
  });
  async function openTerminal() {
    await page.getByRole("button", { name: "Open terminal" }).click();
    await page.getByText(/^Running: pid \d+/).waitFor();
    await waitScreen(/[#$] ?$/); // the prompt: typed-ahead input could be eaten by the shell's start
    return Number(await page.locator(".terminal-box").getAttribute("data-pid"));
  }
  // Controls without a label, buttons and links without a name, unnamed charts.
  const a11yProblems = () => page.evaluate(() => [
    ...[...document.querySelectorAll("input, select, textarea")].filter((e) => !e.labels?.length && !e.getAttribute("aria-label")).map((e) => "unlabelled " + e.outerHTML.slice(0, 80)),
    ...[...document.querySelectorAll("button, a[href]")].filter((e) => !(e.getAttribute("aria-label") || e.textContent.trim())).map((e) => "unnamed " + e.outerHTML.slice(0, 80)),
    ...[...document.querySelectorAll("svg")].filter((e) => e.getAttribute("role") !== "img" || !e.getAttribute("aria-label")).map(() => "unnamed svg"),
  ]);
  async function signOut() {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
  }

  test("the pages load without a key, hold no data, and carry a strict CSP", async () => {
    const r = await fetch(`${brigd.url}/ui/`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get("content-type"), /^text\/html/);
    const csp = r.headers.get("content-security-policy");
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /style-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    assert.equal(r.headers.get("x-content-type-options"), "nosniff");
    const html = await r.text();
    assert.doesNotMatch(html, /<script>|style=|sbx_|acc_|prj_|brig_[a-z0-9]{8}/i, "no inline script or style, no data");
    const js = await fetch(`${brigd.url}/ui/main.js`);
    assert.match(js.headers.get("content-type"), /^text\/javascript/);
    const etag = js.headers.get("etag");
    assert.ok(etag);
    assert.equal((await fetch(`${brigd.url}/ui/main.js`, { headers: { "If-None-Match": etag } })).status, 304);
    assert.equal((await fetch(`${brigd.url}/ui/style.css`)).headers.get("content-type"), "text/css; charset=utf-8");
    // Sent as they are (fetch() would fold "/ui/%2e%2e" into "/" before sending it).
    for (const p of ["/ui/..%2F..%2Fetc%2Fpasswd", "/ui/%2e%2e", "/ui/nothing.js", "/ui/.%2Fmain.js", "/ui/../v1/account"])
      assert.equal(await rawStatus(brigd.url, p), 404, p);
    assert.equal((await fetch(`${brigd.url}/v1/sandboxes`)).status, 401);
    assert.equal((await fetch(`${brigd.url}/v1/account/ledger`)).status, 401);

    // /ui and / lead to the page: a browser that types either lands on the sign-in.
    for (const [path, status] of [["/ui", 301], ["/", 302]]) {
      const r = await fetch(brigd.url + path, { redirect: "manual" });
      assert.equal(r.status, status, path);
      assert.equal(r.headers.get("location"), "/ui/", path);
      await page.goto(brigd.url + path);
      assert.equal(page.url(), `${brigd.url}/ui/`);
      await page.getByRole("heading", { name: "Sign in" }).waitFor();
    }
    await go("");
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    assert.equal(await page.locator("#nav").isVisible(), false);
    await shot("signin");
  });

  test("a wrong key is refused; the admin key signs in by keyboard only", async () => {
    await signIn("brig_not_a_key");
    await page.getByText("That key was refused (401)").waitFor();
    // Keyboard: the key field has the focus; the skip link comes before it, Enter submits.
    await go("");
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.id), "key");
    await page.keyboard.press("Shift+Tab");
    assert.equal(await page.evaluate(() => document.activeElement.className), "skip");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.id), "key");
    await page.keyboard.type(brigd.key);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Sandboxes" }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("brig.key")), brigd.key);
    assert.equal(await page.evaluate(() => localStorage.length), 0);
  });

  test("a sandbox created through the API appears, and opens from the keyboard", async () => {
    const p = (await brigd.admin("GET", "/v1/projects")).projects[0];
    await brigd.admin("PATCH", `/v1/projects/${p.id}`, { egress: { mode: "allowlist", domains: ["allowed.test"] } });
    sid = (await brigd.admin("POST", "/v1/sandboxes", { template: "base" })).id;
    const row = page.locator(`tr[data-id="${sid}"]`);
    await row.waitFor();
    assert.match(await row.textContent(), /running.*base.*small|base.*small.*container/s);
    await shot("sandboxes");
    await row.getByRole("link", { name: sid }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: `Sandbox ${sid}` }).waitFor();
    await page.locator("li[data-kind='sandbox.created']").waitFor();
    await page.getByText("Following live…").waitFor();
  });

  test("commands, denied connections and DNS refusals show up live, as text", async () => {
    await brigd.admin("POST", `/v1/sandboxes/${sid}/exec`, { cmd: "echo hello-ui" });
    await page.locator("li[data-kind=exec]", { hasText: "echo hello-ui" }).waitFor();
    assert.match(await page.locator("li[data-kind=exec]").first().textContent(), /exit 0, exited/);
    // brigd's host side through the gateway: dropped and logged as denied
    await brigd.admin("POST", `/v1/sandboxes/${sid}/exec`, {
      cmd: "curl -sS -m 1 http://$(awk '/nameserver/{print $2}' /etc/resolv.conf):81/ || true", timeout: 20 });
    await page.locator("li[data-kind='net.denied']").first().waitFor();
    assert.match(await page.locator("li[data-kind='net.denied']").first().textContent(), /:81 denied/);
    // XSS planted through the API: a command line, a file name, a DNS name
    await brigd.admin("POST", `/v1/sandboxes/${sid}/exec`, { argv: ["echo", XSS] });
    await brigd.admin("PUT", `/v1/sandboxes/${sid}/files?path=${encodeURIComponent("/root/" + XSS_FILE)}`, "x");
    const dns = `import socket,struct,re
ns=re.search(r'nameserver\\s+(\\S+)',open('/etc/resolv.conf').read()).group(1)
q=struct.pack('>HHHHHH',7,0x100,1,0,0,0)+b''.join(bytes([len(l)])+l for l in [b'<script>x=1</script>"q\\'',b'evil',b'test'])+b'\\0'+struct.pack('>HH',1,1)
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3);s.sendto(q,(ns,53))
try: s.recv(512)
except Exception: pass`;
    await brigd.admin("POST", `/v1/sandboxes/${sid}/exec`, { argv: ["python3", "-c", dns] });
    await page.locator("li[data-kind=exec]", { hasText: XSS }).waitFor();
    await page.locator("li[data-kind='file.write']", { hasText: XSS_FILE }).waitFor();
    const d = page.locator("li[data-kind=dns]", { hasText: "<script>" });
    await d.first().waitFor();
    assert.match(await d.first().textContent(), /refused/);
    await page.getByRole("button", { name: "List" }).click();
    await page.getByRole("cell", { name: XSS_FILE, exact: true }).waitFor();
    // The file browser downloads what the API holds.
    await brigd.admin("PUT", `/v1/sandboxes/${sid}/files?path=/root/report.txt`, "forty-two\n");
    await page.getByRole("button", { name: "List" }).click();
    const [dl] = await Promise.all([page.waitForEvent("download"),
      page.getByRole("button", { name: "Download report.txt" }).click()]);
    assert.equal(dl.suggestedFilename(), "report.txt");
    assert.equal(readFileSync(await dl.path(), "utf8"), "forty-two\n");
    await page.locator("svg.chart polyline").first().waitFor();
    await page.getByRole("img", { name: /^Memory/ }).locator("line.limit").waitFor({ state: "attached" }); // the tariff's limit
    assert.equal(await page.evaluate(() => window.__xss), undefined, "no planted script ran");
    assert.equal(await page.locator("script").count(), 1, "only main.js is a script element");
    await shot("sandbox");
  });

  test("a terminal: keys go in, output comes out, it resizes, and closing it ends the shell", async () => {
    const pid = await openTerminal();
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute("aria-label")), "Terminal input");
    await page.getByRole("button", { name: "Refresh processes" }).click();
    await page.getByRole("row", { name: new RegExp(`^${pid} .*exec bash -l.* yes`) }).waitFor(); // in the processes
    await page.getByLabel("Terminal input").focus();
    await page.keyboard.type("echo ui-$((6*7))-ok; stty size\n");
    await waitScreen(/^ui-42-ok$/);
    const size = async () => (await page.locator("#term-state").textContent()).match(/(\d+)×(\d+)/).slice(1).map(Number);
    const [cols, rows] = await size();
    assert.ok((await screen()).includes(`${rows} ${cols}`), "the shell's terminal has the page's size");
    await page.locator("section[aria-labelledby=h-term]").screenshot({ path: join(SHOTS, "terminal.png") });
    // Narrower: the terminal refits and tells the process (…/resize).
    await page.setViewportSize({ width: 700, height: 900 });
    await page.waitForFunction((c) => Number(document.getElementById("term-state").textContent.match(/(\d+)×/)?.[1]) < c, cols);
    const [cols2, rows2] = await size();
    await page.keyboard.type("clear; stty size\n");
    await waitScreen(new RegExp(`^${rows2} ${cols2}$`));
    assert.deepEqual(await a11yProblems(), [], "the view with the terminal open");
    await page.setViewportSize({ width: 1280, height: 900 });
    // Shift+Tab leaves the terminal (Tab is the shell's): no keyboard trap.
    await page.keyboard.press("Shift+Tab");
    assert.equal(await page.evaluate(() => document.activeElement.textContent), "Close terminal");
    await page.keyboard.press("Enter");
    await termState("Closed: the shell was hung up.");
    const p = await brigd.admin("GET", `/v1/sandboxes/${sid}/processes/${pid}`);
    assert.equal(p.running, false);
    assert.equal(p.signal, 1, "hung up (SIGHUP)");
    // Leaving the view closes it too.
    const pid2 = await openTerminal();
    await page.getByRole("link", { name: "Sandboxes" }).click();
    const p2 = await brigd.admin("POST", `/v1/sandboxes/${sid}/processes/${pid2}/wait`, { timeout: 15 });
    assert.equal(p2.running, false);
    assert.deepEqual(problems.filter((x) => /Content Security Policy/.test(x)), [], "xterm.js styled itself within the CSP");
    await go(`#/sandbox/${sid}`);
    await page.getByRole("heading", { name: `Sandbox ${sid}` }).waitFor();
  });

  test("money: balance, spend against limits, per-day chart, ledger", async () => {
    await brigd.admin("PATCH", "/v1/account", { daily_limit_micro_usd: 5000000 });
    await page.getByRole("link", { name: "Usage and money" }).click();
    await page.getByRole("heading", { name: "Usage and money" }).waitFor();
    await page.locator("[data-fact=Balance]").waitFor();
    await page.locator("meter").first().waitFor();
    await page.getByRole("img", { name: /Spend per day/ }).waitFor();
    await page.locator("tr", { hasText: "charge" }).first().waitFor();
    const ledger = await brigd.admin("GET", "/v1/account/ledger?limit=1000");
    assert.ok(ledger.entries.some((e) => e.kind === "credit" && e.note === "initial credit"), JSON.stringify(ledger).slice(0, 400));
    assert.ok(ledger.entries.some((e) => e.kind === "charge" && e.sandbox_id === sid));
    const usage = await brigd.admin("GET", "/v1/account/usage?days=7");
    assert.equal(usage.days.length, 7);
    await shot("money");
  });

  test("host: capacity, warm pool, metrics summary", async () => {
    await page.getByRole("link", { name: "Host" }).click();
    await page.locator("[data-fact='Sandboxes (slots)']").waitFor();
    await page.locator("[data-fact='API requests']").waitFor();
    await shot("host");
  });

  test("an admin changes the egress policy; the timeline shows it", async () => {
    const p = (await brigd.admin("GET", "/v1/projects")).projects[0];
    await brigd.admin("PUT", `/v1/projects/${p.id}/secrets/API_TOKEN`, { value: "tok-never-shown" });
    await page.getByRole("link", { name: "Projects" }).click();
    await page.getByRole("heading", { name: "Projects" }).waitFor();
    const sec = page.locator(`section[data-project="${p.id}"]`);
    await sec.locator("ul.secrets code", { hasText: "API_TOKEN" }).waitFor(); // secrets by name
    assert.doesNotMatch(await page.content(), /tok-never-shown/);
    await sec.getByLabel("Egress mode").selectOption("none");
    await sec.getByRole("button", { name: "Save egress policy" }).click();
    await sec.getByText("Saved: none").waitFor();
    assert.equal((await brigd.admin("GET", `/v1/projects/${p.id}`)).egress.mode, "none");
    await shot("projects");
    await go(`#/sandbox/${sid}`);
    await page.locator("li[data-kind='project.policy']", { hasText: "egress → none" }).last().waitFor();
  });

  test("a sandbox key sees its sandboxes but is refused the policy and the secrets", async () => {
    const p = (await brigd.admin("GET", "/v1/projects")).projects[0];
    await brigd.admin("PUT", `/v1/projects/${p.id}/secrets/DB_PASSWORD`, { value: "hunter2-not-shown" });
    const k = (sandboxKey = (await brigd.admin("POST", `/v1/projects/${p.id}/keys`, { scope: "sandbox" })).key);
    await signOut();
    await signIn(k);
    await page.getByText("sandbox key ·").waitFor();
    await page.getByRole("link", { name: "Sandboxes" }).click();
    await page.locator(`tr[data-id="${sid}"]`).waitFor().catch(async (e) => {
      throw new Error(e.message + "\nthe view: " + (await page.locator("#view").textContent()));
    });
    await page.getByRole("link", { name: "Projects" }).click();
    const sec = page.locator(`section[data-project="${p.id}"]`);
    await sec.getByText("403 forbidden").waitFor();
    assert.equal(await sec.getByLabel("Egress mode").isDisabled(), true);
    assert.equal(await sec.getByRole("button", { name: "Save egress policy" }).count(), 0);
    // The page adds no privilege: the API itself refuses this key.
    const status = await page.evaluate(async (id) => (await fetch(`/v1/projects/${id}`, {
      method: "PATCH", headers: { Authorization: "Bearer " + sessionStorage.getItem("brig.key"), "Content-Type": "application/json" },
      body: JSON.stringify({ egress: { mode: "open" } }) })).status, p.id);
    assert.equal(status, 403);
    assert.doesNotMatch(await page.content(), /hunter2/);
    await shot("projects-sandbox-key");
    // The terminal with this key: on its own project's sandbox, yes; on another project's, the
    // API answers 404 (it does not exist for this key), and so does a process's input there.
    await go(`#/sandbox/${sid}`);
    await openTerminal();
    await page.keyboard.type("echo sandbox-key-$((1+1))\n");
    await waitScreen(/^sandbox-key-2$/);
    await page.getByRole("button", { name: "Close terminal" }).click();
    await termState("Closed: the shell was hung up.");
    const other = await brigd.admin("POST", "/v1/projects", { name: "other" });
    const osb = await brigd.admin("POST", "/v1/sandboxes", { template: "minimal", project: other.id });
    const oproc = await brigd.admin("POST", `/v1/sandboxes/${osb.id}/exec`, { argv: ["sleep", "60"], background: true });
    await go(`#/sandbox/${osb.id}`);
    await page.getByText("404 not_found").first().waitFor();
    assert.equal(await page.getByRole("button", { name: "Open terminal" }).count(), 0);
    const refused = await page.evaluate(async ([id, pid]) => {
      const h = { Authorization: "Bearer " + sessionStorage.getItem("brig.key"), "Content-Type": "application/json" };
      const exec = await fetch(`/v1/sandboxes/${id}/exec`, { method: "POST", headers: h,
        body: JSON.stringify({ argv: ["/bin/sh"], background: true, pty: { cols: 80, rows: 24 } }) });
      const stdin = await fetch(`/v1/sandboxes/${id}/processes/${pid}/stdin`, { method: "POST", headers: h, body: "id\n" });
      return [exec.status, stdin.status];
    }, [osb.id, oproc.pid]);
    assert.deepEqual(refused, [404, 404]);
    await brigd.admin("DELETE", `/v1/sandboxes/${osb.id}`);
    await signOut();
    await signIn(brigd.key);
  });

  test("from the list: +10 min moves the deadline later; the filters", async () => {
    await page.getByRole("link", { name: "Sandboxes" }).click();
    const before = Date.parse((await brigd.admin("GET", `/v1/sandboxes/${sid}`)).expires_at);
    await page.getByRole("button", { name: `Extend ${sid} by 10 minutes` }).click();
    await page.getByText(`${sid} now lives 10 more minutes`).waitFor();
    const after = Date.parse((await brigd.admin("GET", `/v1/sandboxes/${sid}`)).expires_at);
    assert.ok(after - before >= 595e3 && after - before <= 605e3, `${before} → ${after}`);
    const row = page.locator(`tr[data-id="${sid}"]`);
    await page.getByLabel("Template").selectOption("minimal");
    await row.waitFor({ state: "detached" });
    await page.getByLabel("Template").selectOption("base");
    await row.waitFor();
    await page.getByLabel("State").selectOption("ended");
    await row.waitFor({ state: "detached" });
    assert.deepEqual([...new Set(await page.locator("tbody tr").evaluateAll((rs) => rs.map((r) => r.dataset.state)))]
      .filter((x) => x !== "deleted" && x !== "failed"), []);
    await page.getByLabel("State").selectOption("");
    await page.getByLabel("Template").selectOption("");
    await row.waitFor();
  });

  test("delete from the list; the end reason shows in the list and the sandbox", async () => {
    // Recently ended sandboxes come from the server: one this tab never saw is listed too.
    const unseen = (await brigd.admin("POST", "/v1/sandboxes", { template: "minimal" })).id;
    await brigd.admin("DELETE", `/v1/sandboxes/${unseen}`);
    await page.reload();
    await page.getByRole("link", { name: "Sandboxes" }).click();
    await page.locator(`tr[data-id="${unseen}"][data-state=deleted]`).waitFor();
    await page.getByRole("button", { name: `Delete ${sid}` }).click();
    const row = page.locator(`tr[data-id="${sid}"][data-state=deleted]`);
    await row.waitFor();
    assert.match(await row.locator("td.reason").textContent(), /deleted \(deleted_by_api\)/);
    await shot("sandboxes-ended");
    await row.getByRole("link", { name: sid }).click();
    await page.locator("[data-fact='End reason']", { hasText: "deleted (deleted_by_api)" }).waitFor();
    await page.locator("li[data-kind='sandbox.ended']").waitFor();
    await page.getByText("Ended: the whole timeline.").waitFor();
    await shot("sandbox-ended");
  });

  test("the operator key sees the host and the accounts", async () => {
    await brigd.admin("POST", "/v1/sandboxes", { template: "minimal" }).then((s) => brigd.admin("DELETE", `/v1/sandboxes/${s.id}`)).catch(() => {});
    await client(brigd.url, brigd.operatorKey)("POST", "/v1/accounts", { name: `acme ${XSS}` });
    await signOut();
    await signIn(brigd.operatorKey);
    await page.getByRole("heading", { name: "Host" }).waitFor();
    await page.getByRole("cell", { name: `acme ${XSS}` }).waitFor();
    assert.equal(await page.getByRole("link", { name: "Sandboxes" }).isVisible(), false);
    await shot("host-operator");
    await signOut();
  });

  test("accessibility basics: labelled controls and named buttons on every view", async () => {
    await signIn(brigd.key);
    for (const v of ["#/sandboxes", "#/money", "#/projects", "#/host"]) {
      await go(v);
      await page.locator("#view h1").waitFor();
      await page.waitForLoadState("networkidle").catch(() => {});
      assert.deepEqual(await a11yProblems(), [], v);
      assert.equal(await page.evaluate(() => document.documentElement.lang), "en");
    }
    // Keyboard: the main navigation is reachable and works from the keyboard.
    await go("#/sandboxes");
    await page.locator("#view h1").waitFor();
    await page.getByRole("link", { name: "Projects" }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Projects" }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.tagName), "H1", "focus moves to the view");
  });

  test("no key in any URL or in brigd's log; nothing ran that should not", async () => {
    for (const k of [brigd.key, brigd.operatorKey, sandboxKey]) {
      assert.ok(!urls.some((u) => u.includes(k)), "a key in a URL");
      assert.ok(!brigd.log().slice(logStart).includes(k), "a key in brigd's log");
    }
    assert.equal(await page.evaluate(() => window.__xss), undefined);
    assert.deepEqual(problems, []);
  });
});
