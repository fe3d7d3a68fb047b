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
and the peak RSS of `inject` against the input size; the same with every
workload selected (`-l ''`, where all the work is done); the KRM function on the
corpus as one ResourceList (as kpt sends it: block YAML, every workload selected)
against the round trips of that ResourceList, with its peak RSS; `inject
--in-place` on the corpus split one file per object against the same run to
stdout and against copying those files, in the benchmark's folder, on a tmpfs
(/dev/shm) and in each folder NVCF_BENCH_IN_PLACE_DIRS names; and `kubectl kustomize` with patches that
add the account, automount and token volume to the default selection, at N=200
and N=2000 (patches only: no trio, so a lower bound for kustomize). Then the
wall time of a one-item ResourceList through the KRM function (median of 30 runs).
"""
import shutil
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


def resource_list(corpus, out):
    """The corpus as kpt would send it: items indented in block YAML, every
    workload selected."""
    with open(corpus) as f, open(out, "w") as o:
        o.write("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n"
                "  apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: fn}\n"
                "  data: {clusterID: bench, selector: ''}\nitems:\n")
        first = True
        for line in f:
            if line.startswith("---"):
                first = True
                continue
            if first:
                o.write("- " + line)
                first = False
            else:
                o.write(("  " + line) if line.strip() else line)


KPT_FN_CONFIG = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fn\n"
                 "data:\n  clusterID: bench\n  selector: ''\n")


def kpt_package(corpus, folder):
    """The corpus as a kpt package (one file), and the functionConfig beside it
    (every workload selected): the package's folder and the config's path."""
    pkg = os.path.join(folder, "pkg")
    os.makedirs(pkg, exist_ok=True)
    shutil.copy(corpus, os.path.join(pkg, "all.yaml"))
    fn = os.path.join(folder, "fn.yaml")
    with open(fn, "w") as f:
        f.write(KPT_FN_CONFIG)
    return pkg, fn


def kpt_resource_list(corpus, out):
    """The corpus as kpt itself sends it: `kpt fn source` of it as a package."""
    folder = os.path.dirname(os.path.abspath(out))
    pkg, fn = kpt_package(corpus, os.path.join(folder, "kpt-" + os.path.basename(out)))
    with open(out, "wb") as o:
        subprocess.run(["kpt", "fn", "source", pkg, "--fn-config", fn], stdout=o, check=True)


WORKLOAD_PATHS = {
    "Pod": "spec", "Deployment": "spec.template.spec", "StatefulSet": "spec.template.spec",
    "DaemonSet": "spec.template.spec", "ReplicaSet": "spec.template.spec", "Job": "spec.template.spec",
    "CronJob": "spec.jobTemplate.spec.template.spec",
}


def kustomization(corpus, folder):
    """kustomize's nearest equivalent of inject on the default selection: one
    strategic-merge patch per workload kind, by label, setting the account and
    automount and adding the token volume."""
    os.makedirs(folder)
    shutil.copy(corpus, os.path.join(folder, "all.yaml"))
    patches = []
    for kind, path in WORKLOAD_PATHS.items():
        api = {"Pod": "v1", "Job": "batch/v1", "CronJob": "batch/v1"}.get(kind, "apps/v1")
        body = ("serviceAccountName: nvcf-worker\nautomountServiceAccountToken: false\n"
                "volumes:\n- name: nvcf-worker-token\n  projected:\n    sources:\n"
                "    - serviceAccountToken: {audience: nvcf-icms:bench, expirationSeconds: 900, path: token}\n")
        keys = path.split(".")
        text, indent = "", ""
        for k in keys:
            text += f"{indent}{k}:\n"
            indent += "  "
        text += "".join(indent + l + "\n" for l in body.splitlines())
        name = f"{kind.lower()}.yaml"
        with open(os.path.join(folder, name), "w") as f:
            f.write(f"apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: any\n{text}")
        patches.append(f"- path: {name}\n  target:\n    kind: {kind}\n    labelSelector: nvcf.io/worker=true\n")
    with open(os.path.join(folder, "kustomization.yaml"), "w") as f:
        f.write("resources: [all.yaml]\npatches:\n" + "".join(patches))


def file_system(path):
    """The file system `path` is on, as `/dev/vda ext4, no journal`: what creating
    inodes costs depends on it (see in_place_runs)."""
    real, best_mount = os.path.realpath(path), ("", "?", "?")
    for line in open("/proc/mounts"):
        dev, mount, fstype = line.split()[:3]
        if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best_mount[0]):
            best_mount = (mount, dev, fstype)
    _, dev, fstype = best_mount
    if fstype == "ext4":
        name = os.path.basename(os.path.realpath(dev))
        journal = any(e.startswith(name + "-") for e in os.listdir("/proc/fs/jbd2")) if os.path.isdir("/proc/fs/jbd2") else False
        fstype += "" if journal else ", no journal"
    return f"{dev} {fstype}"


def in_place_runs(folder, where, n=3):
    """Best wall time of `inject -i` on fresh copies of `folder` made in `where`, of
    the same run to stdout, and of making one copy (the file system creating as many
    files). All copies are made, and synced, before the first run: the benchmark
    deletes nothing between a copy and its run. On ext4 without a journal each new
    inode walks past the inodes deleted in the last minute (`recently_deleted`), so
    there the figures move with what else the machine deletes; a tmpfs isolates the
    tool's own work from the disk."""
    base = tempfile.mkdtemp(prefix="nvcf-in-place-", dir=where)
    try:
        package = os.path.join(base, "package")
        shutil.copytree(folder, package)
        copies, times = [], []
        for i in range(n):
            start = time.perf_counter()
            shutil.copytree(package, os.path.join(base, f"copy{i}"))
            copies.append(time.perf_counter() - start)
        os.sync()  # the copies' own writes are not the runs' to flush
        for i in range(n):
            copy = os.path.join(base, f"copy{i}")
            times.append(run([TOOL, "inject", "-i", "-q", "-f", copy, "--cluster-id", "bench", "-l", ""])[0])
        to_stdout = best([TOOL, "inject", "-q", "-f", package, "--cluster-id", "bench", "-l", ""])
        return min(times), to_stdout, min(copies)
    finally:
        shutil.rmtree(base)


def in_place_places(tmp):
    """Where in-place runs are measured: the benchmark's folder, a tmpfs when there
    is one, and the folders NVCF_BENCH_IN_PLACE_DIRS names (colon-separated: a
    journaled file system, say)."""
    places = [tmp]
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        places.append("/dev/shm")
    places += [p for p in os.environ.get("NVCF_BENCH_IN_PLACE_DIRS", "").split(":") if p]
    return places


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
        every = [TOOL, "inject", "-f", corpus, "--cluster-id", "bench", "-l", ""]
        inj_all = best(every)
        rss_all = peak_rss(every)
        rl = os.path.join(tmp, f"rl{n}.yaml")
        resource_list(corpus, rl)
        rl_size = os.path.getsize(rl)
        rl_events = best([BASE, "events", rl])
        rl_naive = best([BASE, "serde-yaml", rl])
        krm_times = []
        for _ in range(3):
            with open(rl, "rb") as f:
                krm_times.append(run([TOOL], stdin=f)[0])
        krm = min(krm_times)
        rss_krm = int(subprocess.check_output([sys.executable, "-c",
            "import resource,subprocess,sys;"
            "subprocess.run([sys.argv[1]],stdin=open(sys.argv[2],'rb'),stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL,check=True);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024)", TOOL, rl]))
        in_place = [(p, in_place_runs(folder, p)) for p in in_place_places(tmp)] if n <= 2000 else []
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
            ("  inject -l '' (every workload) (s)", inj_all),
            ("  inject -l '' / event round trip (target <= 1.3)", inj_all / rt),
            ("  inject -l '' / serde_yaml round trip (target <= 1.0)", inj_all / naive),
            ("  inject -l '' peak RSS / input size (target <= 3 at N=10000)", rss_all / size),
            (f"  ResourceList of the corpus (MB)", rl_size / 1e6),
            ("  KRM function, every workload (s)", krm),
            ("  KRM / event round trip of the ResourceList", krm / rl_events),
            ("  KRM / serde_yaml round trip of the ResourceList (target <= 1.2)", krm / rl_naive),
            ("  KRM peak RSS / ResourceList size (target <= 3 at N=10000)", rss_krm / rl_size),
        ] + [
            row
            for place, (inp, out, copying) in in_place
            for row in [
                (f"  in place in {place} ({file_system(place)}):", None),
                (f"    inject -i -l '', {files} files (s)", inp),
                (f"    inject -l '' to stdout, {files} files (s)", out),
                ("    in place / to stdout (target <= 1.5 at N=2000)", inp / out),
                (f"    copying the {files} files (Python copytree) (s)", copying),
                ("    (in place - to stdout) / copying the files", (inp - out) / copying),
            ]
        ]:
            if value is None:
                print(label)
                continue
            print(f"{label:58} {value:12.3f}")
    if shutil.which("kubectl"):
        for n in [200, 2000]:
            corpus = os.path.join(tmp, f"k{n}.yaml")
            with open(corpus, "w") as f:
                subprocess.run([sys.executable, GEN, str(n), "--yaml"], stdout=f, check=True)
            folder = os.path.join(tmp, f"kustomize{n}")
            kustomization(corpus, folder)
            kz = best(["kubectl", "kustomize", folder], n=1 if n > 200 else 3)
            inj = best([TOOL, "inject", "-f", corpus, "--cluster-id", "bench"])
            print(f"N={n}: kubectl kustomize with equivalent patches")
            print(f"{'  kubectl kustomize (s)':58} {kz:12.3f}")
            print(f"{'  inject (s)':58} {inj:12.3f}")
            print(f"{'  kubectl kustomize / inject':58} {kz / inj:12.1f}")
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
