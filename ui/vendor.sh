#!/bin/sh
# vendor.sh installs the pinned front-end parts from ui/assets-src/package-lock.json
# (npm ci: exact versions, checksums verified) and copies their minified files
# into ui/static/vendor (embedded in the binary) and ui/testdata/vendor
# (axe-core, for the browser tests only). Run it from anywhere; commit the output.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/assets-src"
npm ci --no-audit --no-fund --ignore-scripts
mkdir -p "$here/static/vendor" "$here/testdata/vendor"
cp node_modules/htmx.org/dist/htmx.min.js "$here/static/vendor/htmx.min.js"
cp node_modules/uplot/dist/uPlot.iife.min.js "$here/static/vendor/uPlot.iife.min.js"
cp node_modules/uplot/dist/uPlot.min.css "$here/static/vendor/uPlot.min.css"
cp node_modules/axe-core/axe.min.js "$here/testdata/vendor/axe.min.js"
for f in htmx.org uplot axe-core; do
	v=$(node -p "require('./node_modules/$f/package.json').version")
	echo "$f $v"
done > "$here/static/vendor/VERSIONS"
