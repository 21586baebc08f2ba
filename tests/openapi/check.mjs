// check.mjs - the JavaScript half of tests/integration/test_openapi.py.
//
//   node check.mjs validate DOC
//       DOC must be a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator), every
//       component schema must compile as JSON Schema 2020-12 (Ajv, strict), and every
//       `examples` entry of a component schema must match its schema.
//   node check.mjs instances DOC < CHECKS
//       CHECKS (stdin): [{"schema": S, "instance": {...}, "what": "POST /v1/sandboxes"}, ...], S a
//       component schema's name or a schema as the document has it (refs to
//       #/components/schemas/...).  Each instance is validated against it, strictly: objects
//       may carry no property the document does not list (additionalProperties: false is
//       implied wherever a schema lists properties and says nothing else), so a field brigd
//       answers but the document lacks is found.  Prints the failures; exit 1 when any.
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const BASE = "urn:brig:openapi:components";

function fail(lines) {
	for (const l of lines) console.log(l);
	process.exit(1);
}

// The component schemas as one JSON Schema document, refs rewritten to $defs.
function componentsSchema(doc, strict) {
	const text = JSON.stringify(doc.components?.schemas ?? {}).replaceAll(
		'"#/components/schemas/',
		'"#/$defs/',
	);
	const defs = JSON.parse(text);
	if (strict) {
		const tighten = (s) => {
			if (Array.isArray(s)) return s.forEach(tighten);
			if (s === null || typeof s !== "object") return;
			if (
				s.properties &&
				!("additionalProperties" in s) &&
				!("unevaluatedProperties" in s) &&
				!("patternProperties" in s)
			)
				s.additionalProperties = false;
			for (const [k, v] of Object.entries(s)) {
				if (k === "examples" || k === "default" || k === "const" || k === "enum") continue;
				if (k === "properties" || k === "$defs" || k === "dependentSchemas") {
					for (const sub of Object.values(v)) tighten(sub);
				} else tighten(v);
			}
		};
		for (const s of Object.values(defs)) tighten(s);
	}
	return { $id: BASE, $defs: defs };
}

function newAjv() {
	const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true, strictTuples: false, strictRequired: false });
	addFormats(ajv);
	return ajv;
}

function describe(errors) {
	return (errors ?? []).map(
		(e) => `  ${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)} (${e.schemaPath})`,
	);
}

async function validate(path) {
	const out = [];
	const validator = new Validator();
	const res = await validator.validate(path);
	if (!res.valid) {
		out.push(`${path} is not a valid OpenAPI document:`);
		out.push(JSON.stringify(res.errors, null, 2));
	} else if (!String(validator.version).startsWith("3.1")) {
		out.push(`${path}: OpenAPI version ${validator.version}, expected 3.1`);
	}
	const doc = JSON.parse(readFileSync(path, "utf8"));
	const ajv = newAjv();
	try {
		ajv.addSchema(componentsSchema(doc, false));
	} catch (e) {
		fail([...out, `component schemas do not compile: ${e.message}`]);
	}
	for (const [name, schema] of Object.entries(doc.components?.schemas ?? {})) {
		let v;
		try {
			v = ajv.getSchema(`${BASE}#/$defs/${name}`);
		} catch (e) {
			out.push(`schema ${name} does not compile: ${e.message}`);
			continue;
		}
		for (const [i, ex] of (schema.examples ?? []).entries()) {
			if (!v(ex)) out.push(`schema ${name}: examples[${i}] does not match:`, ...describe(v.errors));
		}
	}
	// Schemas used inline in paths must compile too (they may $ref the components).
	const inline = [];
	const mediaExamples = new Map();
	const walk = (node, where, key) => {
		if (node === null || typeof node !== "object") return;
		if (node.schema && typeof node.schema === "object") {
			inline.push([where, node.schema, key]);
			if (node.examples) mediaExamples.set(node.schema, node.examples);
		}
		for (const [k, v] of Object.entries(node)) walk(v, `${where}/${k}`, k);
	};
	walk(doc.paths ?? {}, "#/paths");
	walk(doc.components?.responses ?? {}, "#/components/responses");
	walk(doc.components?.parameters ?? {}, "#/components/parameters");
	for (const [where, schema, media] of inline) {
		const s = JSON.parse(
			JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${BASE}#/$defs/`),
		);
		let v;
		try {
			v = ajv.compile(s);
		} catch (e) {
			out.push(`schema at ${where} does not compile: ${e.message}`);
			continue;
		}
		// A media type's examples must match its schema (NDJSON: line by line).
		const examples = Object.entries(mediaExamples.get(schema) ?? {});
		for (const [name, ex] of examples) {
			const values =
				media === "application/x-ndjson"
					? String(ex.value).split("\n").filter((l) => l).map((l) => JSON.parse(l))
					: [ex.value];
			for (const value of values)
				if (!v(value))
					out.push(`${where}: example ${name} does not match:`, ...describe(v.errors));
		}
	}
	if (out.length) fail(out);
	console.log(`${path}: valid OpenAPI ${validator.version}`);
}

function instances(path) {
	const doc = JSON.parse(readFileSync(path, "utf8"));
	const checks = JSON.parse(readFileSync(0, "utf8"));
	const ajv = newAjv();
	ajv.addSchema(componentsSchema(doc, true));
	const out = [];
	const compiled = new Map();
	for (const c of checks) {
		const key = JSON.stringify(c.schema);
		let v = compiled.get(key);
		if (!v) {
			if (typeof c.schema === "string") v = ajv.getSchema(`${BASE}#/$defs/${c.schema}`);
			else v = ajv.compile(JSON.parse(key.replaceAll('"#/components/schemas/', `"${BASE}#/$defs/`)));
			compiled.set(key, v);
		}
		if (!v) {
			out.push(`${c.what}: no schema ${key} in the document`);
			continue;
		}
		if (!v(c.instance))
			out.push(
				`${c.what}: the answer does not match ${key}:`,
				...describe(v.errors),
				`  answer: ${JSON.stringify(c.instance).slice(0, 2000)}`,
			);
	}
	if (out.length) fail(out);
	console.log(`${checks.length} answers match their schemas`);
}

const [mode, path] = process.argv.slice(2);
if (mode === "validate" && path) await validate(path);
else if (mode === "instances" && path) instances(path);
else fail(["usage: node check.mjs validate DOC | instances DOC < CHECKS"]);
