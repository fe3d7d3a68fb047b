#!/bin/sh
# Seeds fuzz/corpus/<target>/ (gitignored) from the tests' fixtures and the shared
# corpus of real manifests. Run from anywhere; idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
real="$root/../shared/corpus/real/kubernetes-examples"
for target in stream resource_list config; do
    mkdir -p "$here/corpus/$target"
done
copy() { # dir target
    [ -d "$1" ] || return 0
    find "$1" -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) | while read -r f; do
        name=$(printf '%s' "${f#"$1"/}" | tr / _)
        cp "$f" "$here/corpus/$2/$name"
    done
}
# Manifest streams: the tests' fixtures and the real-world corpus.
copy "$root/tests/fixtures" stream
copy "$real" stream
# ResourceLists: fixtures that are ResourceLists, plus each real manifest wrapped in one.
if [ -d "$root/tests/fixtures" ]; then
    grep -rl 'kind: *"\?ResourceList' "$root/tests/fixtures" 2>/dev/null | while read -r f; do
        cp "$f" "$here/corpus/resource_list/$(basename "$f")"
    done
fi
if [ -d "$real" ]; then
    for f in "$real"/*.yaml; do
        out="$here/corpus/resource_list/rl_$(basename "$f")"
        {
            printf 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n  apiVersion: fn.nvcf.io/v1alpha1\n  kind: WorkerIdentity\n  spec: {clusterID: c1, selector: {matchLabels: {app: x}}}\nitems:\n'
            # Indent each document as one item; multi-document files become several items.
            awk 'BEGIN{first=1} /^---/{first=1; next} { if (first) { printf "- %s\n", $0; first=0 } else { printf "  %s\n", $0 } }' "$f"
        } >"$out"
    done
fi
# Configs: both config kinds and a few variations.
cat >"$here/corpus/config/typed.yaml" <<'YAML'
apiVersion: fn.nvcf.io/v1alpha1
kind: WorkerIdentity
metadata: {name: x}
spec:
  mode: inject
  clusterID: prod-1
  audience: nvcf-icms:prod-1
  expirationSeconds: 3600
  tokenSource: psat
  selector: {matchLabels: {nvcf.io/worker: "true"}, matchExpressions: [{key: tier, operator: In, values: [a, b]}]}
  includeInitContainers: true
YAML
cat >"$here/corpus/config/configmap.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: fn}
data:
  clusterID: abc
  expirationSeconds: "900"
  selector: "nvcf.io/worker=true,tier in (a,b),!legacy"
  includeInitContainers: "false"
  mode: validate
YAML
copy "$root/tests/fixtures" config
echo "seeded: $(ls "$here/corpus/stream" | wc -l) stream, $(ls "$here/corpus/resource_list" | wc -l) resource_list, $(ls "$here/corpus/config" | wc -l) config"
