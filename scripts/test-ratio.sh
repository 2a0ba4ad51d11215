#!/bin/sh
# test-ratio.sh — test lines against source lines, counted the way the project counts:
#   tests:  every *_test.go file, plus the non-test files of store/storetest/ and
#           internal/dbtest/ (the conformance suite and the database test helpers);
#   source: every other .go file.
# bench/ (a separate module) and clients/ (PHP and TypeScript clients, their own
# tests) are left out. Files are those git tracks, so the count is reproducible from
# a commit. Run from anywhere in the repository.
set -eu
cd "$(git rev-parse --show-toplevel)"
files=$(git ls-files '*.go' | grep -v -e '^bench/' -e '^clients/' || true)
count() { if [ -n "$1" ]; then printf '%s\n' "$1" | tr '\n' '\0' | xargs -0 cat | wc -l | tr -d ' '; else echo 0; fi; }
tests=$(printf '%s\n' "$files" | grep -e '_test\.go$' -e '^store/storetest/' -e '^internal/dbtest/' || true)
source=$(printf '%s\n' "$files" | grep -v -e '_test\.go$' -e '^store/storetest/' -e '^internal/dbtest/' || true)
t=$(count "$tests")
s=$(count "$source")
echo "test lines:   $t"
echo "source lines: $s"
awk -v t="$t" -v s="$s" 'BEGIN { if (s == 0) print "ratio: n/a"; else printf "ratio:        %.3f\n", t / s }'
