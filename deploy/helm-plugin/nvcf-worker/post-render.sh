#!/bin/sh
# Helm 4 runs this (plugin.yaml) with the rendered manifests on stdin and each
# --post-renderer-args value as an argument; it runs
# `kubectl-nvcf-worker inject -f - ARGS...` from PATH.
#
# Helm 4 (4.3) shows nothing of a post-renderer plugin that exits non-zero: it
# buffers the plugin's stderr and drops it, and prints only
# `plugin "nvcf-worker" exited with error` (internal/plugin/runtime_subprocess.go,
# runPostrenderer and executeCmd). What it does show is an error in the
# plugin's output: it splits the output into documents
# (pkg/action/action.go, splitAndDeannotate, kyaml kio.ParseAll) and rejects a
# separator line with text after `---`, quoting that line:
#   Error: error while parsing post rendered output: error parsing YAML:
#   invalid document separator: --- kubectl-nvcf-worker inject failed (exit 2): ...
# So when inject fails, this prints its stderr, joined onto one such line, and
# exits 0 so that Helm reads it. The line after it is not YAML either: no
# version of Helm can take this output for manifests, and inject's partial
# output, if any, is never passed on.

err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT

if out=$(kubectl-nvcf-worker inject -f - "$@" 2>"$err"); then
  printf '%s\n' "$out"
  exit 0
else
  code=$?
fi

msg=
while IFS= read -r line || [ -n "$line" ]; do
  [ -n "$line" ] && msg="${msg:+$msg | }$line"
done <"$err"
[ -n "$msg" ] || msg="no error output"

printf '# kubectl-nvcf-worker inject failed; Helm shows the next line as its error\n'
printf -- '--- kubectl-nvcf-worker inject failed (exit %s): %s\n' "$code" "$msg"
printf '[ not manifests: the post-renderer failed\n'
exit 0
