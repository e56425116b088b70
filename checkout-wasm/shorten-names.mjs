// Gives the wasm module's imports, exports and import module one- and two-letter names and
// rewrites the wasm-bindgen glue to match. wasm-bindgen's names carry hashes
// (`__wbg_fetch_21015a0a4570ab44`) that no compressor can shrink: about 2 KB of checkout.js's
// gzipped size. wasm-opt --minify-imports-and-exports-and-modules renames them in the module
// and prints the mapping, which this applies to the glue. Any name not found is an error, so a
// new wasm-bindgen cannot break the script silently.
//
// node shorten-names.mjs <mapping.json> <renamed.wasm> <glue.js>   (the glue is rewritten in place)
import { readFileSync, writeFileSync } from 'node:fs';

const [mappingPath, wasmPath, gluePath] = process.argv.slice(2);
const mapping = JSON.parse(readFileSync(mappingPath, 'utf8'));
const modules = new Set(
  WebAssembly.Module.imports(new WebAssembly.Module(readFileSync(wasmPath))).map((i) => i.module),
);
if (modules.size !== 1) throw new Error(`expected one import module, got ${[...modules]}`);
const [module] = modules;
let glue = readFileSync(gluePath, 'utf8');

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
function swap(pattern, replacement, what) {
  const before = glue;
  glue = glue.replace(pattern, replacement);
  if (glue === before) throw new Error(`${what}: not found in the glue`);
}

const oldModules = new Set(mapping.imports.map(([from]) => from));
for (const from of oldModules) {
  swap(new RegExp(`(["'])${escape(from)}\\1(?=\\s*:)`, 'g'), JSON.stringify(module), from);
}
// Imports are the keys of the glue's import object: `name: function(…)`.
for (const [, name, short] of mapping.imports) {
  swap(new RegExp(`\\b${escape(name)}\\b(?=\\s*:)`, 'g'), short, name);
}
// Exports are read as `wasm.name`; some (wasm-bindgen's abort hooks) are not read at all.
for (const [name, short] of mapping.exports) {
  if (!new RegExp(`\\b${escape(name)}\\b`).test(glue)) continue;
  swap(new RegExp(`\\bwasm\\.${escape(name)}\\b`, 'g'), `wasm.${short}`, name);
}
// No old name may be left where the module is looked up (the glue's own functions may keep
// theirs: `function checkout(…)` wraps `wasm.checkout`).
const left = [
  ...mapping.imports.map(([, name]) => new RegExp(`\\b${escape(name)}\\b\\s*:`)),
  ...mapping.exports.map(([name]) => new RegExp(`\\bwasm\\.${escape(name)}\\b`)),
].find((pattern) => pattern.test(glue));
if (left) throw new Error(`${left.source}: still in the glue`);
writeFileSync(gluePath, glue);
