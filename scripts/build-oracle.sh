#!/usr/bin/env bash
# Builds the kubectl decoding oracle (tests/go/oracle, Go; test infrastructure only)
# for kubectl 1.32's modules (oracle/go132.mod, a graph of its own) and the current
# release the control plane is built from (tests/go/go.mod, shared with the control
# plane and helm: see go-env.sh), and prints the directory that holds both binaries,
# cached outside the clone and keyed by the oracle's sources and module files.
set -euo pipefail
source "$(dirname "$0")/go-env.sh"
o="$go_src/oracle"

key=$(go_key "$o/main.go" "$o/go132.mod" "$o/go132.sum" "$0")
out="$go_cache/oracle-$key"
if [ ! -x "$out/oracle-1.32" ] || [ ! -x "$out/oracle-current" ]; then
  mkdir -p "$go_cache"
  tmp=$(mktemp -d "$out.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$go_src" && go build -trimpath -o "$tmp/oracle-current" ./oracle \
    && go build -trimpath -modfile=oracle/go132.mod -o "$tmp/oracle-1.32" ./oracle) >&2
  go_publish "$tmp" "$out"
  trap - EXIT
fi
echo "$out"
