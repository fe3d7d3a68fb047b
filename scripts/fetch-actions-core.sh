#!/usr/bin/env bash
# Fetches the workflow-command writer of GitHub's Actions toolkit (@actions/core,
# lib/command.js and lib/utils.js: issueCommand, escapeData, escapeProperty,
# toCommandProperties) from npm, for the test of `validate -o github` only. The two
# files import nothing else, so no dependency is installed. Cached outside the
# clone, keyed by this script; the files' checksums are pinned.
#
# Prints the directory holding lib/command.js (an ES module package).
set -euo pipefail

PACKAGE=@actions/core@3.0.1
COMMAND_SHA256=0dcb853bfdbe5d8f67057fe04d4bcf0751c6aa1ff3e7ecf2ad06c9f3305b84a4
UTILS_SHA256=83459929616d7d64cd85316e735722cb4310f5ad35a415a4f72b28b85bf3cef0

key=$(sha256sum "$0" | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-nvcf-worker/actions-core-$key"

if [ ! -f "$dir/lib/command.js" ]; then
  command -v npm >/dev/null 2>&1 || { echo "fetch-actions-core: missing npm (it fetches $PACKAGE)" >&2; exit 1; }
  mkdir -p "$(dirname "$dir")"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$PACKAGE" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/command.js package/lib/utils.js
  printf '%s  %s\n' "$COMMAND_SHA256" "$tmp/package/lib/command.js" "$UTILS_SHA256" "$tmp/package/lib/utils.js" |
    sha256sum -c --quiet - >&2
  echo '{"type": "module"}' >"$tmp/package/package.json"
  # Published at once; a run that lost the race to another keeps the winner's
  # (removing it would pull the folder from under a test running node there).
  mv -T "$tmp/package" "$dir" 2>/dev/null || true
  [ -f "$dir/lib/command.js" ] || { echo "fetch-actions-core: $dir has no lib/command.js" >&2; exit 1; }
fi
echo "$dir"
