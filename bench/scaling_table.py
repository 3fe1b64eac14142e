#!/usr/bin/env python3
"""Medians of bench/scaling.sh's outputs: per benchmark, np and size, the
median time of gorun (g), gorun with GORUN_COLL_SHM=0 (p) and Open MPI (o),
the spread of each ((max-min)/median of the repeats) and the ratios to
Open MPI; then the host's steal time over the runs (scaling.sh appends
it to each output), and the runs that lost the most to it. Usage:
scaling_table.py OUTDIR [NAME], NAME heading the p column when
scaling.sh ran with ALT (default shm=0)"""
import collections
import glob
import os
import re
import statistics
import sys

d = sys.argv[1]
alt = sys.argv[2] if len(sys.argv) > 2 else "shm=0"
runs = collections.defaultdict(list)  # (who, bench, np, size) -> [us]
steal = {}  # file -> ticks stolen over its run
for f in glob.glob(os.path.join(d, "[gpo]-*-np*-*.txt")):
    m = re.match(r"([gpo])-(\w+)-np(\d+)-(\d+)\.txt", os.path.basename(f))
    who, bench, np = m.group(1), m.group(2), int(m.group(3))
    for line in open(f):
        p = line.split()
        if len(p) == 3 and p[:2] == ["#", "steal_ticks"]:
            steal[os.path.basename(f)] = int(p[2])
            continue
        if len(p) >= 2 and p[0].isdigit():
            try:
                runs[(who, bench, np, int(p[0]))].append(float(p[1]))
            except ValueError:
                pass
        elif bench == "barrier" and len(p) == 1:
            try:
                runs[(who, bench, np, 0)].append(float(p[0]))
            except ValueError:
                pass


def med(k):
    v = runs.get(k)
    if not v:
        return None, None
    m = statistics.median(v)
    return m, (max(v) - min(v)) / m if m else 0


keys = sorted({(b, n, s) for (_, b, n, s) in runs})
print(f"{'bench':10} {'np':>3} {'bytes':>7} {'gorun':>9} {'spr':>5} {alt:>9} {'spr':>5} {'ompi':>9} {'spr':>5} {'g/o':>6} {'p/o':>6}")
for b, n, s in keys:
    g, gs = med(("g", b, n, s))
    p, ps = med(("p", b, n, s))
    o, os_ = med(("o", b, n, s))
    f = lambda x: f"{x:9.2f}" if x is not None else f"{'-':>9}"
    fs = lambda x: f"{100*x:4.0f}%" if x is not None else f"{'-':>5}"
    r = lambda x: f"{x / o:6.2f}" if x is not None and o else f"{'-':>6}"
    print(f"{b:10} {n:3} {s:7} {f(g)} {fs(gs)} {f(p)} {fs(ps)} {f(o)} {fs(os_)} {r(g)} {r(p)}")

if steal:
    for who, name in (("g", "gorun"), ("p", alt), ("o", "ompi")):
        v = [t for f, t in steal.items() if f.startswith(who + "-")]
        if v:
            print(f"# steal ticks a run ({name}, {len(v)} runs): median {statistics.median(v):.0f}, max {max(v)}, total {sum(v)}")
    worst = sorted(steal.items(), key=lambda kv: -kv[1])[:5]
    print("# most stolen: " + ", ".join(f"{f} {t}" for f, t in worst))
