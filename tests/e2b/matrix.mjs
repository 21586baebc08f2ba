// matrix.mjs - the conformance matrix of docs/e2b.md, made by the test run: a test records a
// row (an SDK call or option, its status, how brig answers) once its assertions about it passed;
// `run` then writes the rows as the doc's table (--write-doc) or checks that the doc says the
// same.  So the table is what the SDK was seen to do, never a promise.
import { readFileSync, writeFileSync } from "node:fs";
import { after } from "node:test";

const rows = [];

/** Records that `call` is `status` (supported | unsupported | differs), with a note. */
export function conform(call, status, note = "") {
  rows.push({ call, status, note });
}

/** Saves this file's rows (BRIG_E2B_MATRIX: the run's directory) when the file ends. */
export function matrixFile(name) {
  after(() => {
    const dir = process.env.BRIG_E2B_MATRIX;
    if (dir) writeFileSync(`${dir}/${name}.json`, JSON.stringify(rows));
  });
}

const BEGIN = "<!-- e2b-matrix:begin -->";
const END = "<!-- e2b-matrix:end -->";

/** node matrix.mjs DIR DOC [--write]: the saved rows as DOC's table; exit 1 when it differs. */
if (process.argv[1] && process.argv[1].endsWith("matrix.mjs")) {
  const [dir, doc, flag] = process.argv.slice(2);
  const all = ["e2b", "e2b-old"].flatMap((n) => JSON.parse(readFileSync(`${dir}/${n}.json`, "utf8")));
  const table = [
    "| SDK call / option | status | how brig answers |",
    "|---|---|---|",
    ...all.map((r) => `| ${r.call} | ${r.status} | ${r.note} |`),
  ].join("\n");
  const text = readFileSync(doc, "utf8");
  const a = text.indexOf(BEGIN), b = text.indexOf(END);
  if (a < 0 || b < a) throw new Error(`${doc}: no ${BEGIN} … ${END}`);
  const next = text.slice(0, a + BEGIN.length) + "\n" + table + "\n" + text.slice(b);
  if (flag === "--write") {
    writeFileSync(doc, next);
    console.log(`matrix: ${all.length} rows written to ${doc}`);
  } else if (next !== text) {
    console.error(`matrix: ${doc}'s table is not what this run saw; run tests/e2b/run --write-doc`);
    process.exit(1);
  } else {
    console.log(`matrix: ${doc} agrees (${all.length} rows)`);
  }
}
