#!/usr/bin/env bash
# Builds the real `krew` v0.4.3 from its published Go module (sigs.k8s.io/krew),
# for the tests only (tests/distribution.rs installs the release archive with it).
# Cached outside the clone, keyed by this script and the Go version.
#
# Prints the path of the krew binary.
set -euo pipefail

KREW_VERSION=v0.4.3

need() { command -v "$1" >/dev/null 2>&1 || { echo "build-krew: missing $1 ($2)" >&2; exit 1; }; }
need go "Go builds krew from sigs.k8s.io/krew through the Go module proxy"
need sha256sum "coreutils"

key=$( { cat "$0"; echo "$KREW_VERSION"; go version; } | sha256sum | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-nvcf-worker/krew-$key"

if [ ! -x "$dir/krew" ]; then
  mkdir -p "$(dirname "$dir")"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # CGO off: a static build that needs no C toolchain; -mod=mod: krew's go.mod
  # predates the go.sum checks of current Go.
  CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$tmp" go install "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" >&2
  # Published at once; a run that lost the race to another keeps the winner's
  # (never removed under a test using it).
  mv -T "$tmp" "$dir" 2>/dev/null || true
  [ -x "$dir/krew" ] || { echo "build-krew: $dir has no krew" >&2; exit 1; }
fi
echo "$dir/krew"
