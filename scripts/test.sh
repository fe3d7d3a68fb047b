#!/usr/bin/env bash
# README's test command: gets every program the tests run that the machine image
# may lack, then runs every test (`cargo test --workspace --locked`, arguments
# passed on). .ci/run calls it after its own checks.
#
# The image has cargo, go, kpt, kubectl, python3, npm/node and openssl. The tests
# also drive the real zsh, fish and git (completion and pre-commit tests) and
# pre-commit, and read YAML, JSON Schema and XML Schema with Python's pyyaml,
# jsonschema and xmlschema:
# installed here when missing (apt-get as root or through sudo; pip for the
# user). The Go programs (control plane, helm, krew, the kubectl oracle) and the
# npm packages are built or fetched by the tests' own scripts (scripts/), cached
# under ${XDG_CACHE_HOME:-~/.cache}/kubectl-nvcf-worker.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1 || { echo "scripts/test.sh: missing $1: $2" >&2; exit 1; }; }
need cargo "the Rust toolchain"
for tool in go kpt kubectl python3 npm node openssl strip; do
  need "$tool" "part of the machine image (the end-to-end tests run it)"
done

missing=()
for tool in zsh fish git; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if ((${#missing[@]})); then
  echo "scripts/test.sh: installing ${missing[*]} (apt-get)" >&2
  as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
pip_install() {
  echo "scripts/test.sh: installing $1 (pip)" >&2
  python3 -m pip install --quiet "$1"
}
python3 -c 'import yaml' 2>/dev/null || pip_install pyyaml
python3 -c 'import jsonschema' 2>/dev/null || pip_install jsonschema
python3 -c 'import xmlschema' 2>/dev/null || pip_install xmlschema
# pip may put the script where PATH does not look (e.g. ~/.local/bin): the tests
# find pre-commit on PATH, so look for it the way pip's own scheme names it.
if ! command -v pre-commit >/dev/null 2>&1; then
  pip_install pre-commit
  scripts_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
  user_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts", "posix_user"))')
  export PATH="$PATH:$scripts_dir:$user_dir"
  need pre-commit "installed by pip but not found in $scripts_dir or $user_dir"
fi

exec cargo test --workspace --locked "$@"
