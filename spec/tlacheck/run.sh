#!/usr/bin/env bash
# run.sh checks the syntax of spec/*.tla with the tree-sitter TLA+ grammar.
# It installs the pinned packages first when node_modules is missing:
# --ignore-scripts because tree-sitter-tlaplus's install script would build a
# native binding we do not use, and .npmrc's legacy-peer-deps keeps npm from
# installing the tree-sitter-cli peer, which downloads a binary at install.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
if [ ! -d node_modules ]; then
  npm ci --legacy-peer-deps --ignore-scripts --no-audit --no-fund
fi
cd ..
shopt -s nullglob
tla=(*.tla)
if [ ${#tla[@]} -eq 0 ]; then
  echo "tlacheck: no .tla files in spec/" >&2
  exit 1
fi
node tlacheck/check.mjs "${tla[@]}"
