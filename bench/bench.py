#!/usr/bin/env python3
"""Throughput and memory benchmark: prints figures, asserts nothing.

Usage: bench/bench.py [N ...]   (default: 2000 10000)

For each corpus size N (../shared/corpus/gen-manifests.py N --yaml) it times, as
whole processes of release builds (best of 3 runs, output to /dev/null):
  - the event-level parse+emit round trip of libyaml-safer (our YAML crate, no tree),
  - a naive serde_yaml parse+emit through serde_json::Value,
  - `inject` over the corpus, with its ratio to both,
  - parse-only of the corpus as one stream and split one file per object,
  - `validate` over both forms, with its ratio to parse-only,
and the peak RSS of `inject` against the input size. Then the wall time of a
one-item ResourceList through the KRM function (median of 30 runs).
"""
import os, resource, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "..", "shared", "corpus", "gen-manifests.py")
REL = os.path.join(ROOT, "target", "release")
TOOL = os.path.join(REL, "kubectl-nvcf-worker")
BASE = os.path.join(REL, "examples", "yaml_baseline")


def run(cmd, stdin=None):
    """Wall seconds and the child's peak RSS in bytes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.run(cmd, stdin=stdin, stdout=null, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{cmd} failed: {p.stderr.decode()[:500]}")
    # ru_maxrss of children is the max over all children so far; measure the
    # memory runs in their own fresh interpreter for an exact figure.
    return wall, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024


def best(cmd, n=3):
    return min(run(cmd)[0] for _ in range(n))


def peak_rss(cmd):
    code = ("import resource,subprocess,sys;"
            "subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL,check=True);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024)")
    return int(subprocess.check_output([sys.executable, "-c", code] + cmd))


def split(corpus, folder):
    docs = open(corpus).read().split("\n---\n")
    for i, d in enumerate(docs):
        d = d[4:] if d.startswith("---\n") else d
        with open(os.path.join(folder, f"{i:06d}.yaml"), "w") as f:
            f.write(d if d.endswith("\n") else d + "\n")
    return len(docs)


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [2000, 10000]
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kubectl-nvcf-worker", "--example", "yaml_baseline"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="nvcf-bench-")
    print(f"{'figure':58} {'value':>12}")
    for n in sizes:
        corpus = os.path.join(tmp, f"c{n}.yaml")
        with open(corpus, "w") as f:
            subprocess.run([sys.executable, GEN, str(n), "--yaml"], stdout=f, check=True)
        size = os.path.getsize(corpus)
        folder = os.path.join(tmp, f"split{n}")
        os.mkdir(folder)
        files = split(corpus, folder)
        rt = best([BASE, "events", corpus])
        naive = best([BASE, "serde-yaml", corpus])
        inj = best([TOOL, "inject", "-f", corpus, "--cluster-id", "bench"])
        parse_stream = best([BASE, "parse", corpus])
        parse_split = best([BASE, "parse", folder])
        val_stream = best([TOOL, "validate", corpus])
        val_split = best([TOOL, "validate", folder])
        rss = peak_rss([TOOL, "inject", "-f", corpus, "--cluster-id", "bench"])
        print(f"N={n}: corpus {size / 1e6:.1f} MB, {files} objects")
        for label, value in [
            ("  libyaml-safer event round trip (s)", rt),
            ("  serde_yaml round trip via serde_json::Value (s)", naive),
            ("  inject (s)", inj),
            ("  inject / event round trip (target <= 1.1 at N=2000)", inj / rt),
            ("  inject / serde_yaml round trip (target <= 1.0)", inj / naive),
            ("  parse only, one stream (s)", parse_stream),
            ("  validate, one stream (s)", val_stream),
            ("  validate / parse, one stream (target <= 1.1)", val_stream / parse_stream),
            (f"  parse only, {files} files (s)", parse_split),
            (f"  validate, {files} files (s)", val_split),
            ("  validate / parse, split files (target <= 1.1)", val_split / parse_split),
            ("  inject peak RSS (MB)", rss / 1e6),
            ("  inject peak RSS / input size (target <= 3 at N=10000)", rss / size),
        ]:
            print(f"{label:58} {value:12.3f}")
    rl = os.path.join(tmp, "one.yaml")
    with open(rl, "w") as f:
        f.write("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n"
                "  data: {clusterID: bench}\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p\n"
                "    labels: {nvcf.io/worker: 'true'}\n  spec:\n    containers:\n    - {name: c, image: x}\n")
    times = []
    for _ in range(30):
        with open(rl, "rb") as f:
            times.append(run([TOOL], stdin=f)[0])
    print(f"{'one-item ResourceList, median wall (ms, target <= 5)':58} {statistics.median(times) * 1000:12.2f}")


if __name__ == "__main__":
    main()
