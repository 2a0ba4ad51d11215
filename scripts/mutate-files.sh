#!/bin/sh
# mutate-files.sh BUDGET PKG FILE... — go-gremlins over only FILE... of
# package directory PKG (for example the claim, finish and record paths of a
# store), within BUDGET (a timeout(1) duration).
#
# gremlins v0.5.0 has no file filter, but it mutates only the lines that
# `git diff --merge-base REF` shows. So the module is copied (working tree,
# not .git) into a scratch repository whose first commit lacks FILE... and
# whose second adds them; run from PKG with diff.relative, the diff is
# exactly FILE.... Every test of PKG still runs against each mutant; set
# MUTATE_RUN to a `go test -run` pattern to bound that too (it goes in
# GOFLAGS, so the coverage run uses it as well: mutants that only other
# tests would kill show as not covered or lived — say so in the report).
set -eu
budget=$1 pkg=$2
shift 2
root=$(git rev-parse --show-toplevel)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/idem-mutate.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
tar -C "$root" --exclude=.git -cf - . | tar -C "$scratch" -xf -
cd "$scratch"
git init -q
git config user.email mutate@localhost
git config user.name mutate
git config diff.relative true
mkdir .hidden
for f in "$@"; do
	mkdir -p ".hidden/$(dirname "$pkg/$f")"
	mv "$pkg/$f" ".hidden/$pkg/$f"
done
git add -A -- . ':!.hidden'
git commit -qm base
git tag mutate-base
cp -R .hidden/. .
rm -rf .hidden
git add -A
git commit -qm files
cd "$pkg"
# -count=1: gremlins times each mutant's tests against its coverage run; a
# cached coverage run takes a second, and every mutant then "times out".
GOFLAGS="${GOFLAGS:-} -count=1"
if [ -n "${MUTATE_RUN:-}" ]; then
	GOFLAGS="$GOFLAGS -run=$MUTATE_RUN"
fi
export GOFLAGS
# No --test-cpu: gremlins v0.5.0 passes it as the one argument "-cpu 1", the
# test binary rejects it, and every mutant is reported KILLED.
timeout "$budget" "$(go env GOPATH)/bin/gremlins" unleash --workers 1 \
	--timeout-coefficient "${MUTATE_TIMEOUT_COEFFICIENT:-4}" ${GREMLINS_ARGS:-} -D mutate-base "$(pwd)"
