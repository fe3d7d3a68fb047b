#!/usr/bin/env bash
# Fetches the official SARIF 2.1.0 JSON schema (OASIS sarif-2.1.0-rtm.5, as
# published by SchemaStore) from the npm package that ships it,
# @microsoft/jest-sarif, for the SARIF test only. Cached outside the clone, keyed
# by this script; the file's checksum is pinned.
#
# Prints the schema file's path.
set -euo pipefail

PACKAGE=@microsoft/jest-sarif@1.0.0-beta.0
MEMBER=package/lib/schemas/sarif-2.1.0-rtm.5.json
SHA256=2d99159ae54a3eea97f81781cff48780548657c35949f4b7f25e99a2ba4de4f8

key=$(sha256sum "$0" | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-nvcf-worker/sarif-schema-$key"
schema="$dir/sarif-2.1.0-rtm.5.json"

if [ ! -f "$schema" ]; then
  command -v npm >/dev/null 2>&1 || { echo "fetch-sarif-schema: missing npm (it fetches $PACKAGE)" >&2; exit 1; }
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$PACKAGE" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" "$MEMBER"
  echo "$SHA256  $tmp/$MEMBER" | sha256sum -c --quiet - >&2
  mv "$tmp/$MEMBER" "$schema"
fi
echo "$schema"
