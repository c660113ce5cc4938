#!/usr/bin/env bash
# Regenerates events/eventspb/events.pb.go byte for byte.
# protoc comes from Debian's protobuf-compiler; protoc-gen-go is built from the
# google.golang.org/protobuf version pinned in go.mod.
# Usage: scripts/genproto.sh          regenerate in place
#        scripts/genproto.sh --check  fail if the committed code is stale
set -euo pipefail
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || { echo "genproto: protoc not found; apt-get install protobuf-compiler" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
out="$tmp/out"
mkdir -p "$out"
protoc --plugin=protoc-gen-go="$tmp/protoc-gen-go" \
  --go_out="$out" --go_opt=paths=source_relative \
  -I events/eventspb events/eventspb/events.proto
if [ "${1:-}" = "--check" ]; then
  if ! cmp -s "$out/events.pb.go" events/eventspb/events.pb.go; then
    echo "genproto: events/eventspb/events.pb.go is stale; run scripts/genproto.sh" >&2
    diff -u events/eventspb/events.pb.go "$out/events.pb.go" | head -40 >&2 || true
    exit 1
  fi
  echo "genproto: generated code is up to date"
else
  cp "$out/events.pb.go" events/eventspb/events.pb.go
fi
