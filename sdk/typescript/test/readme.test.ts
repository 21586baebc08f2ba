/**
 * The README's TypeScript quick start as a newcomer runs it, against a real brigd: its
 * package.json, tsconfig.json, main.ts and main.mjs, taken from README.md itself (so the two
 * cannot drift), in a fresh project outside the repository that installs the SDK with the
 * README's `npm install /path/to/brig/sdk/typescript`; then the README's `npm start` (tsc, then
 * node main.js) and `node main.mjs`.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Sandbox } from "@brig/sdk";
import { REPO, useBrigd } from "../../testlib/brigd.js";

const run = promisify(execFile);

/** The README's "From TypeScript" section: its sh block and the files named by a caption. */
function quickStart(): { sh: string; files: Map<string, string> } {
  const readme = readFileSync(join(REPO, "README.md"), "utf8");
  const start = readme.indexOf("### From TypeScript");
  assert.ok(start >= 0, "README.md has no '### From TypeScript' section");
  const rest = readme.slice(readme.indexOf("\n", start) + 1);
  const section = rest.slice(0, rest.search(/^##/m));
  const sh = /^```sh\n([\s\S]*?)^```$/m.exec(section);
  assert.ok(sh, "no sh block in the README's TypeScript section");
  // A caption line that starts with a file's name ("`main.ts`:", "`package.json` (…):"), a blank
  // line, then the fenced block.
  const files = new Map<string, string>();
  for (const m of section.matchAll(/^`([\w-]+\.\w+)`[^\n]*:\n\n```\w*\n([\s\S]*?)^```$/gm)) files.set(m[1]!, m[2]!);
  return { sh: sh[1]!, files };
}

describe("the README's TypeScript quick start", () => {
  const { brigd } = useBrigd(before, after);
  const { sh, files } = quickStart();
  let dir = "";
  // The project, as the README's sh block makes it: its files in an empty directory, then
  // `npm install /path/to/brig/sdk/typescript` (--prefer-offline: npm's cache may answer for the
  // packages sdk/build installed already).
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "brig-readme-"));
    for (const [name, text] of files) writeFileSync(join(dir, name), text);
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", join(REPO, "sdk", "typescript")], {
      cwd: dir,
    });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const env = () => ({ ...process.env, BRIG_URL: brigd().url, BRIG_API_KEY: brigd().key });
  const noSandboxLeft = async () => assert.deepEqual(await Sandbox.list({ client: brigd().client }), []);

  test("shows package.json, tsconfig.json, main.ts and main.mjs", () => {
    assert.deepEqual([...files.keys()].sort(), ["main.mjs", "main.ts", "package.json", "tsconfig.json"]);
    assert.match(files.get("main.ts")!, /^await using sb = await Sandbox\.create/m);
    assert.match(files.get("main.mjs")!, /\} finally \{\n\s+await sb\.kill\(\);/);
    // The TypeScript the SDK itself is built with (sdk/package-lock.json), as the README says.
    const lock = JSON.parse(readFileSync(join(REPO, "sdk", "package-lock.json"), "utf8"));
    const dev = JSON.parse(files.get("package.json")!).devDependencies as Record<string, string>;
    for (const [name, version] of Object.entries(dev)) {
      assert.equal(version, lock.packages[`node_modules/${name}`]?.version, `${name} in the README`);
    }
  });

  test("main.ts as it is is no JavaScript this Node.js parses (why main.mjs is there)", async () => {
    writeFileSync(join(dir, "pasted.mjs"), files.get("main.ts")!);
    const r = await run("node", ["--check", "pasted.mjs"], { cwd: dir }).catch((e: { stderr: string }) => e);
    assert.match(r.stderr, /SyntaxError/, `node ${process.version} parses \`await using\`: the README can say so`);
  });

  test("npm start: tsc compiles `await using`, node runs main.js", async () => {
    const commands = sh.split("\n").map((l) => l.replace(/\s+#.*$/, "").trim());
    assert.ok(commands.includes("npm install /path/to/brig/sdk/typescript"), sh);
    assert.ok(commands.includes("npm start"), sh);
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    assert.match(pkg.dependencies["@brig/sdk"], /^file:/);

    const r = await run("npm", ["start", "--silent"], { cwd: dir, env: env() });
    assert.equal(r.stdout, "0 42\n\n", r.stderr);
    await noSandboxLeft();
  });

  test("node main.mjs: the plain-JavaScript variant", async () => {
    const r = await run("node", ["main.mjs"], { cwd: dir, env: env() });
    assert.equal(r.stdout, "0 42\n\n", r.stderr);
    await noSandboxLeft();
  });
});
