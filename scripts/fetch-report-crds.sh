#!/usr/bin/env bash
# Fetches the policy report CRDs that `audit --apply-reports` writes to, for the
# live tests only, from the projects' published Go modules (through the Go module
# proxy, checked against the checksum database by `go mod download`):
#
#   wgpolicyk8s.io/v1alpha2 PolicyReport, ClusterPolicyReport: the copy Kyverno
#     installs, github.com/kyverno/kyverno config/crds/policyreport/ (the proxy
#     does not serve sigs.k8s.io/wg-policy-prototypes; Kyverno's copy is what a
#     Kyverno cluster has);
#   openreports.io/v1alpha1 Report, ClusterReport: github.com/openreports/reports-api
#     config/crd/.
#
# Cached outside the clone, keyed by this script; each file's checksum is pinned.
# Prints the folder holding the four CRD files.
set -euo pipefail

KYVERNO=github.com/kyverno/kyverno@v1.19.1
OPENREPORTS=github.com/openreports/reports-api@v0.2.1
# module member, sha256
FILES=(
  "$KYVERNO config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml 595ab5728178e3ebe8a9ed9210a32484eb7a0e2dc061b276a3afca703b8ba7c4"
  "$KYVERNO config/crds/policyreport/wgpolicyk8s.io_clusterpolicyreports.yaml ee99a9dd0a1fc96de02f37962b26c2dfa052477c40fa3a60cb2690d30ce2a82d"
  "$OPENREPORTS config/crd/openreports.io_reports.yaml d9e81ed2ce5ce6923b1411b5b6fbafec1c33df515657c627bab8f5ff4388c156"
  "$OPENREPORTS config/crd/openreports.io_clusterreports.yaml 9b29a60e505a314b66cffd48844c1c0ba0ae09c2b11248ce6d5f901a930f0d69"
)

key=$(sha256sum "$0" | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-nvcf-worker/report-crds-$key"

if [ ! -d "$dir" ]; then
  command -v go >/dev/null 2>&1 || { echo "fetch-report-crds: go is required (it fetches $KYVERNO and $OPENREPORTS)" >&2; exit 1; }
  mkdir -p "$(dirname "$dir")"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  for module in "$KYVERNO" "$OPENREPORTS"; do
    # Outside any module: no go.mod of this repository is read or changed.
    src=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$module" \
      | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -n "$src" ] || { echo "fetch-report-crds: go mod download $module gave no folder" >&2; exit 1; }
    for entry in "${FILES[@]}"; do
      read -r m member sum <<<"$entry"
      [ "$m" = "$module" ] || continue
      echo "$sum  $src/$member" | sha256sum -c --quiet - >&2
      cp "$src/$member" "$tmp/$(basename "$member")"
    done
  done
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
  trap - EXIT
fi
echo "$dir"
