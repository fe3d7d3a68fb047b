# Sourced by the scripts that build the Go programs the tests need (never shipped:
# the tool is pure Rust): build-control-plane.sh, build-helm.sh, build-oracle.sh.
#
# They build from one module graph, tests/go/go.mod (Kubernetes v1.36.3 with its
# staging modules at v0.36.3, helm 3 and 4, the current oracle), with the same
# flags, so Go's build cache compiles each package they share (k8s.io/api,
# apimachinery, client-go, apiserver, grpc, ...) once for all of them, whichever
# script runs first. Each script publishes its binaries into a cache folder keyed by
# its inputs and prints it; a second run builds nothing.
go_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
go_src="$go_root/tests/go"
go_cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-nvcf-worker"
command -v go >/dev/null || { echo "$(basename "$0"): go is required (Go 1.26 and the Go module proxy)" >&2; exit 1; }
command -v sha256sum >/dev/null || { echo "$(basename "$0"): sha256sum (coreutils) is required" >&2; exit 1; }

# CGO off: static binaries that need no C toolchain. The same flags everywhere, or
# the build cache keeps a copy of every package per set of flags.
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local

# go_key FILE...: a key over the shared module, this file, the given files and the
# Go toolchain.
go_key() {
  { cat "$go_src/go.mod" "$go_src/go.sum" "$go_root/scripts/go-env.sh" "$@"; go version; go env GOOS GOARCH; } \
    | sha256sum | cut -c1-16
}

# go_publish TMP OUT: moves a finished build folder into place at once, so a
# concurrent or interrupted run never sees half a folder.
go_publish() {
  rm -rf "$2.partial"
  mv "$1" "$2.partial" && mv -T "$2.partial" "$2" 2>/dev/null || rm -rf "$2.partial"
}
