#!/usr/bin/env bash
# Builds the control plane the live tests run against (etcd, kube-apiserver,
# kube-controller-manager) from published Go modules (tests/go, see go-env.sh),
# into a cache folder outside the clone keyed by every input, and prints that
# folder. A second run with the same inputs builds nothing. Test-only: the shipped
# binary stays pure Rust.
#
#   scripts/build-control-plane.sh            # build if needed, print the folder
#   NVCF_CONTROL_PLANE_CACHE=DIR ...          # cache root (default below)
set -euo pipefail
source "$(dirname "$0")/go-env.sh"
cache="${NVCF_CONTROL_PLANE_CACHE:-$go_cache}"

key=$(go_key "$0")
out="$cache/control-plane-$key"
if [[ -x "$out/etcd" && -x "$out/kube-apiserver" && -x "$out/kube-controller-manager" ]]; then
  echo "$out"; exit 0
fi

kube_version=$(cd "$go_src" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
[[ -n "$kube_version" ]] || { echo "build-control-plane: no k8s.io/kubernetes version in $go_src/go.mod" >&2; exit 1; }
major=${kube_version#v}; minor=${major#*.}; minor=${minor%%.*}; major=${major%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
echo "build-control-plane: building $kube_version and etcd into $out" >&2
(cd "$go_src" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
(cd "$go_src" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
"$tmp/kube-apiserver" --version >&2
go_publish "$tmp" "$out"
trap - EXIT
echo "build-control-plane: built in $((SECONDS - start)) s" >&2
echo "$out"
