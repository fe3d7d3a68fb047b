#!/usr/bin/env bash
# Builds the real `helm` 3 and 4 from the published Helm Go modules, for the tests
# only (the shipped binary stays pure Rust). Cached outside the clone, keyed by the
# inputs (this script, the Helm versions, the Go version), so CI builds them once
# per machine and a fresh machine builds them cold.
#
# Prints the cache directory; it holds helm3/helm and helm4/helm.
set -euo pipefail

HELM3_VERSION=v3.22.0
HELM4_VERSION=v4.3.2

need() { command -v "$1" >/dev/null 2>&1 || { echo "build-helm: missing $1 ($2)" >&2; exit 1; }; }
need go "Go builds helm from helm.sh/helm/v3 and /v4 through the Go module proxy"
need sha256sum "coreutils"

key=$( { cat "$0"; echo "$HELM3_VERSION $HELM4_VERSION"; go version; } | sha256sum | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-nvcf-worker/helm-$key"

if [ ! -x "$dir/helm3/helm" ] || [ ! -x "$dir/helm4/helm" ]; then
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # CGO off: a static build that needs no C toolchain.
  export CGO_ENABLED=0
  GOBIN="$tmp/helm3" go install "helm.sh/helm/v3/cmd/helm@$HELM3_VERSION" >&2
  GOBIN="$tmp/helm4" go install "helm.sh/helm/v4/cmd/helm@$HELM4_VERSION" >&2
  # Publish both at once: a concurrent or interrupted run never sees half a cache.
  rm -rf "$dir.old"
  [ -d "$dir/helm3" ] && mv "$dir" "$dir.old" && mkdir -p "$dir"
  mv "$tmp/helm3" "$dir/helm3"
  mv "$tmp/helm4" "$dir/helm4"
  rm -rf "$dir.old"
fi
echo "$dir"
