// Compiles contracts/*.sol with solc-js (offline: the compiler ships inside the npm package)
// into .cache/contracts/<Name>.json ({abi, bytecode, selectors}), again only when a source changed.
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const solc = require("solc");

const root = path.resolve(__dirname, "..");
const sourceDir = path.join(root, "contracts");
const outDir = path.join(root, ".cache", "contracts");
const names = fs.readdirSync(sourceDir).filter((f) => f.endsWith(".sol")).sort();
const sources = {};
const hash = crypto.createHash("sha256").update(solc.version());
for (const name of names) {
  const content = fs.readFileSync(path.join(sourceDir, name), "utf8");
  sources[name] = { content };
  hash.update(name).update(content);
}
const stamp = path.join(outDir, ".sources.sha256");
const digest = hash.digest("hex");
if (fs.existsSync(stamp) && fs.readFileSync(stamp, "utf8") === digest) process.exit(0);

const input = {
  language: "Solidity",
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.methodIdentifiers"] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors || []).filter((e) => e.severity === "error");
if (errors.length) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
fs.mkdirSync(outDir, { recursive: true });
for (const file of Object.keys(output.contracts)) {
  for (const [name, contract] of Object.entries(output.contracts[file])) {
    const artefact = {
      abi: contract.abi,
      bytecode: "0x" + contract.evm.bytecode.object,
      selectors: contract.evm.methodIdentifiers,
    };
    fs.writeFileSync(path.join(outDir, name + ".json"), JSON.stringify(artefact));
  }
}
fs.writeFileSync(stamp, digest);
console.log(`compiled ${names.join(", ")} with solc ${solc.version()}`);
