"""Side-by-side table of gorun's GPU collectives and NCCL's, in nccl-tests' terms.

    python3 bench/gpu/compare.py NP DIR [PNG]

DIR holds run-coll.sh's outputs: gorun-<collective>.txt (examples/osu
-d cuda), gorun-allreduce-<algorithm>.txt and nccl.txt (nccl_coll.py). For
each collective and size: time (µs, both timed to the result being in
place), gorun's time over NCCL's, and algbw and busbw (GB/s) as nccl-tests
defines them: algbw = bytes / time with bytes the larger buffer (allgather:
SIZE per rank × NP; reduce_scatter: SIZE in all), busbw = algbw × 2(n-1)/n
for allreduce, × (n-1)/n for allgather and reduce_scatter, × 1 for bcast.
With PNG, also plots busbw against size for each collective (gnuplot).
"""
import os, re, subprocess, sys

def osu(path):
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        f = line.split()
        if len(f) == 2 and f[0].isdigit():
            out[int(f[0])] = float(f[1])
    return out

def nccl(path):
    out, cur = {}, None
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.match(r"# (\w+) ", line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        f = line.split()
        if cur is not None and len(f) == 2 and f[0].isdigit():
            cur[int(f[0])] = float(f[1])
    return out

def plot(png, n, d, series):
    """series: collective -> (sizes, gorun busbw, NCCL busbw)."""
    cmds = ["set terminal pngcairo size 1400,1000", "set output '%s'" % png,
            "set multiplot layout 2,2 title 'gorun vs NCCL, GPU collectives, %d GPUs (busbw, GB/s; higher is better)'" % n,
            "set termoption noenhanced", "set logscale x 2", "set logscale y 10", "set format x '2^%L'", "set format y '%g'", "set xlabel 'bytes'",
            "set ylabel 'busbw GB/s'", "set key left top", "set grid"]
    for c, rows in series.items():
        dat = os.path.join(d, "plot-%s.dat" % c)
        with open(dat, "w") as f:
            for size, g, r in rows:
                f.write("%d %s %s\n" % (size, g if g == g else "?", r if r == r else "?"))
        cmds.append("set title '%s'" % c)
        cmds.append("plot '%s' using 1:2 with linespoints title 'gorun', '' using 1:3 with linespoints title 'NCCL'" % dat)
    cmds.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(cmds).encode(), check=True)

def main():
    n, d = int(sys.argv[1]), sys.argv[2]
    series = {}
    ref = nccl(os.path.join(d, "nccl.txt"))
    factor = {"allreduce": 2 * (n - 1) / n, "allgather": (n - 1) / n, "reduce_scatter": (n - 1) / n, "bcast": 1.0}
    for c in ["allreduce", "allgather", "reduce_scatter", "bcast"]:
        g, r = osu(os.path.join(d, "gorun-%s.txt" % c)), ref.get(c, {})
        extra = {}
        if c == "allreduce":
            for a in ["oneshot", "ring"]:
                extra[a] = osu(os.path.join(d, "gorun-allreduce-%s.txt" % a))
        print("## %s, %d ranks (time in µs; algbw, busbw in GB/s)" % (c, n))
        hdr = "%10s %10s %10s %7s %8s %8s %8s %8s" % ("size", "gorun", "NCCL", "g/NCCL", "g algbw", "g busbw", "N algbw", "N busbw")
        for a in extra:
            hdr += " %10s" % a
        print(hdr)
        for s in sorted(set(g) | set(r)):
            nbytes = s * n if c == "allgather" else s
            def bw(t):
                return (nbytes / (t * 1e-6) / 1e9) if t else float("nan")
            tg, tn = g.get(s), r.get(s)
            series.setdefault(c, []).append((s, bw(tg) * factor[c], bw(tn) * factor[c]))
            line = "%10d %10s %10s %7s %8.2f %8.2f %8.2f %8.2f" % (
                s,
                "%.2f" % tg if tg else "-",
                "%.2f" % tn if tn else "-",
                "%.2f" % (tg / tn) if tg and tn else "-",
                bw(tg), bw(tg) * factor[c], bw(tn), bw(tn) * factor[c])
            for a, v in extra.items():
                line += " %10s" % ("%.2f" % v[s] if s in v else "-")
            print(line)
        print()
    if len(sys.argv) > 3:
        plot(sys.argv[3], n, d, series)

if __name__ == "__main__":
    main()
