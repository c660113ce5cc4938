#!/usr/bin/env bash
# run.sh runs the LangGraph client suite: the pinned @langchain/langgraph-sdk
# against LangGraph's own JS server (in memory), then against artifactr serve
# --http, the same test files both times (test/README.md).
# Usage: test/langgraph/run.sh                 both servers
#        TARGETS=artifactr test/langgraph/run.sh   one of them
#        ARTIFACTR_BIN=PATH ...                    use that binary, build none
#        test/langgraph/run.sh runs.test.mjs       some files only
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"

# @langchain/core needs Node 20; Debian 12's own nodejs is 18.
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "test/langgraph: node $(node --version) is too old: the pinned LangGraph packages need Node >= 20.16" >&2
  exit 1
fi

# npm ci from the committed lockfile, again only when the lockfile changed.
# --ignore-scripts: no install script is needed (esbuild's only checks its
# binary, which comes as a registry package).
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --ignore-scripts --no-audit --no-fund
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
targets="${TARGETS:-langgraph artifactr}"
if [[ " $targets " == *" artifactr "* ]] && [ -z "${ARTIFACTR_BIN:-}" ]; then
  echo "building artifactr"
  (cd "$root" && go build -o "$tmp/artifactr" ./cmd/artifactr)
  export ARTIFACTR_BIN="$tmp/artifactr"
fi

if [ $# -gt 0 ]; then files=("$@"); else files=(*.test.mjs); fi
failed=()
for target in $targets; do
  echo "==> LangGraph client suite against $target"
  # Files run side by side (each starts its own server); the tests mostly
  # wait on agents and timers, not on the CPU.
  if ! TARGET="$target" node --test --test-concurrency="${SUITE_CONCURRENCY:-3}" "${files[@]}"; then failed+=("$target"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "LangGraph client suite FAILED against: ${failed[*]}" >&2
  exit 1
fi
