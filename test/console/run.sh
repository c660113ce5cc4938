#!/usr/bin/env bash
# The console's end-to-end tests: builds artifactr and nats-server, installs
# playwright-core from the lockfile, and drives Debian's Chromium headless,
# then Debian's Firefox ESR headless over WebDriver BiDi (firefox.test.mjs).
# Screenshots go to CONSOLE_SHOTS (default: a temp folder, printed).
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/artifactr" ./cmd/artifactr && go build -o "$tmp/nats-server" github.com/nats-io/nats-server/v2)
[ -x /usr/bin/chromium ] || { echo "console tests: /usr/bin/chromium missing (apt-get install chromium)" >&2; exit 1; }
[ -x "${FIREFOX:-/usr/bin/firefox-esr}" ] || { echo "console tests: ${FIREFOX:-/usr/bin/firefox-esr} missing (apt-get install firefox-esr)" >&2; exit 1; }
# npm ci when playwright-core is missing or is not the pinned version.
want=$(node -p 'require("./package.json").devDependencies["playwright-core"]')
have=$(node -p 'try { require("./node_modules/playwright-core/package.json").version } catch { "" }')
[ "$have" = "$want" ] || npm ci --no-audit --no-fund --loglevel=error
export ARTIFACTR_BIN="$tmp/artifactr" NATS_SERVER_BIN="$tmp/nats-server"
export CONSOLE_SHOTS="${CONSOLE_SHOTS:-$tmp/../artifactr-console-shots}"
node --test --test-concurrency=1 --test-reporter=spec console.test.mjs firefox.test.mjs
