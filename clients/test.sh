#!/usr/bin/env bash
# Runs the test suites of the TypeScript and PHP clients against a real
# `idem serve` built from this checkout. Installs what is missing: the npm
# dependencies (npm ci, from package-lock.json) and php-cli + php-curl
# (Debian). Exits non-zero when a suite fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "== building idem"
(cd "$root" && go build -o "$tmp/idem" ./cmd/idem)
export IDEM_BIN="$tmp/idem"

status=0

echo "== TypeScript client"
if ! command -v npm >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
	else
		echo "node and npm are missing" >&2
		exit 1
	fi
fi
(cd "$here/typescript" && npm ci --no-audit --no-fund && npm test) || status=1

echo "== PHP client"
if ! command -v php >/dev/null || ! php -m | grep -qx curl; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq php-cli php-curl >/dev/null
	else
		echo "php-cli and php-curl are missing" >&2
		exit 1
	fi
fi
php "$here/php/tests/run.php" || status=1

exit $status
