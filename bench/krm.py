#!/usr/bin/env python3
"""The KRM function alone, streaming (the binary) beside the tree path
(examples/krm_tree, `Memory::Hold`) in the same run: wall time against the round
trips of the ResourceList, peak RSS against its size, and whether both answer
the same bytes; on the ResourceList `bench.resource_list` writes and on what
kpt itself writes (`kpt fn source` of the corpus as a package), also with an
anchor and an alias in every Service (under validate and under inject). Then, at
N=2000, `kpt fn eval --exec` of the binary end to end against `kpt fn eval
--exec cat` on the same package (output to stdout, best of 3). Builds nothing:
`cargo build --release --bin kubectl-nvcf-worker --example yaml_baseline
--example krm_tree` first. Usage: bench/krm.py [N ...]"""
import os, re, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench
REL = bench.REL
TOOL = os.path.join(REL, "kubectl-nvcf-worker")
TREE = os.path.join(REL, "examples", "krm_tree")
BASE = os.path.join(REL, "examples", "yaml_baseline")
tmp = tempfile.mkdtemp(prefix="krm-bench-")
def rss(tool, rl):
    return int(subprocess.check_output([sys.executable, "-c",
        "import resource,subprocess,sys;"
        "subprocess.run([sys.argv[1]],stdin=open(sys.argv[2],'rb'),stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL,check=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024)", tool, rl]))
def t(tool, rl):
    ts = []
    for _ in range(3):
        with open(rl, "rb") as f:
            ts.append(bench.run([tool], stdin=f)[0])
    return min(ts)
def eval_exec(n, corpus):
    """`kpt fn eval --exec` of the binary against `--exec cat`, same package."""
    pkg, fn = bench.kpt_package(corpus, os.path.join(tmp, f"eval{n}"))
    cat = shutil.which("cat")
    walls = {}
    for label, exe in [("binary", TOOL), ("cat", cat)]:
        walls[label] = bench.best(["kpt", "fn", "eval", pkg, "--exec", exe, "--fn-config", fn, "-o", "stdout"])
    print(f"N={n} kpt fn eval --exec: binary {walls['binary']:.3f}s / cat {walls['cat']:.3f}s = {walls['binary']/walls['cat']:.2f}")
def kpt_anchored(corpus, out, validate=True):
    """What kpt writes of the corpus with every Service's selector an alias of an
    anchor on its name (an item's own anchors: they stream), run under validate,
    or under inject (edits beside items with aliases stream since 8 December)."""
    anchored = out + ".corpus.yaml"
    with open(corpus) as f, open(anchored, "w") as o:
        o.write(re.sub(r"(kind: Service\nmetadata:\n  name: )(\S+)(\n(?:.*\n)*?  selector:\n    app: )\2\n",
                       r"\1&n \2\3*n\n", f.read()))
    bench.kpt_resource_list(anchored, out)
    if not validate:
        return
    with open(out) as f:
        text = f.read()
    at = text.rindex("\n  data:\n") + len("\n  data:\n")
    with open(out, "w") as f:
        f.write(text[:at] + "    mode: validate\n")
for n in [int(a) for a in sys.argv[1:]] or [2000, 10000]:
    corpus = os.path.join(tmp, f"c{n}.yaml")
    with open(corpus, "w") as f:
        subprocess.run([sys.executable, bench.GEN, str(n), "--yaml"], stdout=f, check=True)
    for layout, write in [("bench", bench.resource_list), ("kpt", bench.kpt_resource_list), ("kpt-anchored", kpt_anchored),
                          ("kpt-anch-inj", lambda c, o: kpt_anchored(c, o, validate=False))]:
        rl = os.path.join(tmp, f"rl{n}-{layout}.yaml")
        write(corpus, rl)
        size = os.path.getsize(rl)
        naive = bench.best([BASE, "serde-yaml", rl])
        events = bench.best([BASE, "events", rl])
        outs = {}
        for label, tool in [("streaming", TOOL), ("tree", TREE)]:
            out = subprocess.run([tool], stdin=open(rl, "rb"), capture_output=True).stdout
            outs[label] = out
            tt = t(tool, rl)
            r = rss(tool, rl)
            print(f"N={n} {layout:12} RL {size/1e6:.1f} MB {label:10} time {tt:.3f}s / serde {tt/naive:.2f} / events {tt/events:.2f}  peak RSS {r/1e6:.1f} MB = {r/size:.2f}x")
        print(f"N={n} {layout:12} outputs identical: {outs['streaming'] == outs['tree']} ({len(outs['streaming'])} bytes)")
    if n == 2000:
        eval_exec(n, corpus)
