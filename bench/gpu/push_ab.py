"""Table of bench/gpu/push-ab.sh's runs: medians over rounds, ratios.

    python3 bench/gpu/push_ab.py OUTDIR COLL=ALG,ALG... ...

OUTDIR/raw holds <coll>-<alg>-<round>.txt (examples/osu -d cuda output)
and OUTDIR/nccl.txt nccl_coll.py's. For each collective and size: the
median time (µs) of each algorithm over the rounds, NCCL's (one run), the
first algorithm's median over each other's and over NCCL's, and the first
algorithm's spread, (max - min) / median.
"""
import glob, os, statistics, sys

from compare import nccl, osu  # the readers of osu -d cuda and nccl_coll.py output


def main():
    d, specs = sys.argv[1], sys.argv[2:]
    ref = nccl(os.path.join(d, "nccl.txt"))
    for spec in specs:
        c, algs = spec.split("=", 1)
        algs = algs.split(",")
        runs = {a: [osu(f) for f in sorted(glob.glob(os.path.join(d, "raw", "%s-%s-*.txt" % (c, a))))] for a in algs}
        rounds = min(len(r) for r in runs.values())
        print("## %s (µs, median of %d rounds; NCCL one run)" % (c, rounds))
        first = algs[0]
        cols = ["size"] + algs + ["NCCL"] + ["%s/%s" % (first, a) for a in algs[1:]] + ["%s/NCCL" % first, "spread"]
        print(" ".join("%10s" % h for h in cols))
        sizes = sorted(set().union(*(r.keys() for rs in runs.values() for r in rs)) if rounds else [])
        for s in sizes:
            med, spread = {}, float("nan")
            for a in algs:
                xs = [r[s] for r in runs[a] if s in r]
                med[a] = statistics.median(xs) if xs else float("nan")
                if a == first and xs and med[a]:
                    spread = (max(xs) - min(xs)) / med[a] * 100
            n = ref.get(c, {}).get(s, float("nan"))
            row = ["%10d" % s] + ["%10.2f" % med[a] for a in algs] + ["%10.2f" % n]
            row += ["%10.2f" % (med[first] / med[a]) for a in algs[1:]] + ["%10.2f" % (med[first] / n), "%9.0f%%" % spread]
            print(" ".join(row))
        print()

main()
