#!/usr/bin/env bash
# pre-commit hook nvcf-worker-validate-repo (.pre-commit-hooks.yaml): validates
# every YAML and JSON file git tracks, as one set, in one run, so a commit that
# stages only a workload is judged with the trio that an unchanged file declares.
#
# Usage: pre-commit-validate-repo.sh [PATHSPEC...]
#   PATHSPEC  git pathspecs to narrow the set (default: the whole repository),
#             e.g. `deploy/` or `:(exclude)chart/templates` (the hook's args)
# The files are the index's (pre-commit stashes unstaged changes first, so the
# working tree holds what is being committed); untracked files never count.
# Runs the kubectl-nvcf-worker on PATH, or $NVCF_WORKER_BIN.
set -euo pipefail

bin="${NVCF_WORKER_BIN:-kubectl-nvcf-worker}"
command -v "$bin" >/dev/null 2>&1 || {
  echo "nvcf-worker-validate-repo: $bin is not on PATH (install it: krew, release archive or cargo install)" >&2
  exit 2
}
[ $# -gt 0 ] || set -- .
files=()
while IFS= read -r -d '' f; do
  case "$f" in
    *.yaml|*.yml|*.json) [ -f "$f" ] && files+=("$f") ;;
  esac
done < <(git ls-files -z -- "$@")
[ ${#files[@]} -gt 0 ] || exit 0
# One run: exec fails loudly (E2BIG) rather than splitting the set like xargs.
exec "$bin" validate -- "${files[@]}"
