#!/usr/bin/env bash
# Builds the real `helm` 3 and 4 for the tests only (the shipped binary stays pure
# Rust), from the published Helm modules as tests/go/go.mod requires them (helm.sh/
# helm/v3 v3.22.0 and /v4 v4.3.2, on the Kubernetes modules the control plane is
# built from; see go-env.sh). Cached outside the clone, keyed by the inputs.
#
# Prints the cache directory; it holds helm3/helm and helm4/helm.
set -euo pipefail
source "$(dirname "$0")/go-env.sh"

key=$(go_key "$0")
dir="$go_cache/helm-$key"
if [ ! -x "$dir/helm3/helm" ] || [ ! -x "$dir/helm4/helm" ]; then
  mkdir -p "$go_cache"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$SECONDS
  (cd "$go_src" && go build -trimpath -ldflags "-s -w" -o "$tmp/helm3/helm" helm.sh/helm/v3/cmd/helm \
    && go build -trimpath -ldflags "-s -w" -o "$tmp/helm4/helm" helm.sh/helm/v4/cmd/helm) >&2
  go_publish "$tmp" "$dir"
  trap - EXIT
  echo "build-helm: built in $((SECONDS - start)) s" >&2
fi
echo "$dir"
