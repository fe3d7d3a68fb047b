#!/bin/sh
# Usage: fuzz/run-bounded.sh TARGET SECONDS
# Runs one cargo-fuzz target for a bounded time on the seeded corpus (for CI).
# Works on stable Rust through RUSTC_BOOTSTRAP=1 (cargo-fuzz needs -Zsanitizer).
# Exit status: 0 when no crash was found, non-zero otherwise (the crashing input is
# in fuzz/artifacts/TARGET/; add it as a regression test in tests/hostile.rs).
set -eu
target=${1:?usage: run-bounded.sh TARGET SECONDS}
seconds=${2:?usage: run-bounded.sh TARGET SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
[ -d "corpus/$target" ] && [ -n "$(ls -A "corpus/$target" 2>/dev/null)" ] || ./seed.sh
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
status=0
cargo fuzz run -O "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 || status=$?
if [ "$status" -ne 0 ]; then
    # The artifact stays on the machine that found it: print it last, where a
    # shortened log still shows it (decode with `base64 -d`).
    for f in "artifacts/$target"/crash-* "artifacts/$target"/oom-* "artifacts/$target"/timeout-*; do
        [ -f "$f" ] || continue
        echo "== $f ($(wc -c < "$f") bytes), base64:"
        head -c 8192 "$f" | base64
    done
fi
exit "$status"
