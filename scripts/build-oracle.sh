#!/usr/bin/env bash
# Builds the kubectl decoding oracle (tests/oracle, Go; test infrastructure only) for
# kubectl 1.32's modules (go132.mod) and a current release (go.mod), and prints the
# directory that holds both binaries. The binaries are cached outside the clone, keyed
# by a hash of the oracle's sources and module files, so a second run is a no-op; Go's
# own module and build caches (in ~) are reused across runs.
set -euo pipefail
src="$(cd "$(dirname "$0")/../tests/oracle" && pwd)"
command -v go >/dev/null || { echo "build-oracle: go is not on PATH (Go >= 1.24 and the Go module proxy are needed)" >&2; exit 1; }
hash=$(cd "$src" && cat main.go go.mod go.sum go132.mod go132.sum | sha256sum | cut -c1-16)
out="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-nvcf-worker/oracle-$hash"
if [ ! -x "$out/oracle-1.32" ] || [ ! -x "$out/oracle-current" ]; then
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  (cd "$src" && go build -trimpath -o "$tmp/oracle-current" . && go build -trimpath -modfile=go132.mod -o "$tmp/oracle-1.32" .) >&2
  mv "$tmp/oracle-current" "$tmp/oracle-1.32" "$out/"
  rmdir "$tmp"
fi
echo "$out"
