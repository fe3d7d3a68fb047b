#!/usr/bin/env bash
# Builds the release binary for one target, packs
#   dist/kubectl-nvcf-worker-<version>-<target>.tar.gz   (binary, LICENSE, README.md)
#   dist/kubectl-nvcf-worker-<version>-<target>.tar.gz.sha256
# and writes that platform's uri and sha256 into krew-manifest.yaml, adding the
# platform's entry when it is missing. It is the only writer of the platforms:
# run it on each platform's CI (docs/install.md).
#
# Usage: scripts/dist.sh [--target TRIPLE] [--binary PATH] [--no-manifest]
#   --target TRIPLE  build for TRIPLE (default: the host's, from `rustc -vV`)
#   --binary PATH    pack PATH instead of building (a binary built for --target)
#   --no-manifest    leave krew-manifest.yaml alone
# Needs cargo (unless --binary) and python3 with PyYAML. The archive is
# reproducible: sorted entries, mtime 0, owner root, gzip without a timestamp.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name=kubectl-nvcf-worker
repo_url=https://github.com/nvidia/kubectl-nvcf-worker
target="" binary="" manifest=1

while [ $# -gt 0 ]; do
  case "$1" in
    --target) target="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --no-manifest) manifest=0; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dist.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -n "$binary" ]; then
  [ -e "$binary" ] || { echo "dist.sh: $binary does not exist" >&2; exit 1; }
  binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
fi
cd "$root"
for f in LICENSE README.md krew-manifest.yaml Cargo.toml; do
  [ -f "$f" ] || { echo "dist.sh: $root/$f is missing" >&2; exit 1; }
done
version="$(python3 -c 'import tomllib,sys; print(tomllib.load(open("Cargo.toml","rb"))["package"]["version"])')"
if [ -z "$target" ]; then
  target="$(rustc -vV | sed -n 's/^host: //p')"
fi

if [ -z "$binary" ]; then
  host="$(rustc -vV | sed -n 's/^host: //p')"
  target_dir="$(cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
  if [ "$target" = "$host" ]; then
    cargo build --release --locked --bin "$name"
    binary="$target_dir/release/$name"
  else
    cargo build --release --locked --bin "$name" --target "$target"
    binary="$target_dir/$target/release/$name"
  fi
fi
[ -x "$binary" ] || { echo "dist.sh: $binary is not an executable" >&2; exit 1; }

mkdir -p dist
archive="dist/$name-$version-$target.tar.gz"
uri="$repo_url/releases/download/v$version/$(basename "$archive")"

python3 - "$binary" "$archive" "$name" <<'PY'
import gzip, hashlib, io, os, sys, tarfile
binary, archive, name = sys.argv[1:]
members = [(name, binary, 0o755), ("LICENSE", "LICENSE", 0o644), ("README.md", "README.md", 0o644)]
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
    for arcname, path, mode in sorted(members):
        data = open(path, "rb").read()
        info = tarfile.TarInfo(arcname)
        info.size, info.mode, info.mtime = len(data), mode, 0
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        tar.addfile(info, io.BytesIO(data))
with open(archive, "wb") as out:
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(buf.getvalue())
digest = hashlib.sha256(open(archive, "rb").read()).hexdigest()
with open(archive + ".sha256", "w") as f:
    f.write(f"{digest}  {os.path.basename(archive)}\n")
PY
sha256="$(cut -d' ' -f1 "$archive.sha256")"

if [ "$manifest" = 1 ]; then
  python3 - krew-manifest.yaml "$target" "$uri" "$sha256" "v$version" <<'PY'
# Rewrites only the uri and sha256 lines of the matching platform entry, or adds
# the entry when the platform is not listed yet, so the rest of the file keeps
# its layout; then re-reads it to check the result. The sha256 is written quoted:
# krew reads YAML 1.1, where an all-digit digest would be a number.
import re, sys, yaml
path, target, uri, sha, version = sys.argv[1:]
arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(target.split("-")[0])
os_ = "darwin" if "-apple-darwin" in target else "linux" if "-linux-" in target else None
if not arch or not os_:
    sys.exit(f"dist.sh: no krew platform for target {target}")
doc = yaml.safe_load(open(path))
if doc["spec"]["version"] != version:
    sys.exit(f"dist.sh: krew-manifest.yaml spec.version is {doc['spec']['version']}, Cargo.toml says {version}")
want = {"os": os_, "arch": arch}
platforms = doc["spec"].get("platforms") or []
index = [i for i, p in enumerate(platforms) if p["selector"].get("matchLabels") == want]
if len(index) > 1:
    sys.exit(f"dist.sh: {len(index)} platforms with matchLabels {want}")
lines = open(path).read().split("\n")
starts = [i for i, l in enumerate(lines) if l.startswith("  - selector:")]
if not index:
    # After the last entry: the end of the platforms list.
    after = starts[-1] if starts else [i for i, l in enumerate(lines) if l == "  platforms:"][0]
    end = ([i for i, l in enumerate(lines) if i > after and l and not l.startswith("  ")] + [len(lines)])[0]
    while end > 0 and lines[end - 1] == "":
        end -= 1
    entry = f"""  - selector:
      matchLabels:
        os: {os_}
        arch: {arch}
    uri: {uri}
    sha256: "{sha}"
    files:
      - from: kubectl-nvcf-worker
        to: .
      - from: LICENSE
        to: .
    bin: kubectl-nvcf-worker""".split("\n")
    lines[end:end] = entry
    index = [len(platforms)]
else:
    end = ([i for i, l in enumerate(lines) if i > starts[-1] and l and not l.startswith("  ")] + [len(lines)])[0]
    lo = starts[index[0]]
    hi = starts[index[0] + 1] if index[0] + 1 < len(starts) else end
    done = set()
    for i in range(lo, hi):
        m = re.match(r"^(    )(uri|sha256): ", lines[i])
        if m:
            value = uri if m.group(2) == "uri" else f'"{sha}"'
            lines[i] = f"{m.group(1)}{m.group(2)}: {value}"
            done.add(m.group(2))
    if done != {"uri", "sha256"}:
        sys.exit(f"dist.sh: the {os_}/{arch} entry lacks a uri or sha256 line")
text = "\n".join(lines)
entry = yaml.safe_load(text)["spec"]["platforms"][index[0]]
assert (entry["uri"], entry["sha256"]) == (uri, sha), entry
open(path, "w").write(text)
print(f"krew-manifest.yaml: {os_}/{arch} -> {sha}")
PY
fi
echo "$archive"
echo "$(wc -c < "$binary" | tr -d ' ') bytes: $binary"
