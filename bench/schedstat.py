"""Per-thread scheduler statistics of the ranks of a running job.

Usage: python3 bench/schedstat.py DELAY INTERVAL [PROGRAM]: after DELAY seconds,
snapshots /proc/PID/task/*/schedstat and the context-switch counts of every
process named PROGRAM (default colldist), again INTERVAL seconds later, and
prints per rank the run and runnable-wait time of its busiest thread, its
nonvoluntary switches, and the run time of its other threads. Behind
bench/results/np64-schedstat-2026-11-28-64core.txt (run beside
`gorun -np 64 colldist -i 100000`).
"""
import os, sys, time, subprocess, collections
def ranks():
    out = subprocess.run(["pgrep", "-x", sys.argv[3] if len(sys.argv) > 3 else "colldist"], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]
def snap(pids):
    d = {}
    for p in pids:
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                try:
                    comm = open(f"/proc/{p}/task/{t}/comm").read().strip()
                    run, wait, slices = map(int, open(f"/proc/{p}/task/{t}/schedstat").read().split())
                    st = dict(l.split(":\t") for l in open(f"/proc/{p}/task/{t}/status").read().splitlines() if ":\t" in l)
                    vol, nvol = int(st["voluntary_ctxt_switches"]), int(st["nonvoluntary_ctxt_switches"])
                    d[(p, int(t))] = (comm, run, wait, slices, vol, nvol)
                except Exception:
                    pass
        except Exception:
            pass
    return d
time.sleep(float(sys.argv[1]))
pids = ranks()
print("ranks:", len(pids))
a = snap(pids); t0 = time.time()
time.sleep(float(sys.argv[2]))
b = snap(pids); dt = time.time() - t0
per = collections.defaultdict(list)
for k, v in b.items():
    if k in a:
        u = a[k]
        per[k[0]].append((v[1]-u[1], v[2]-u[2], v[3]-u[3], v[4]-u[4], v[5]-u[5], k[1]))
print(f"interval {dt:.2f} s; per rank: main thread (most run time): run ms, wait ms (runnable, not running), nonvoluntary switches; other threads: count that ran, their run ms")
rows = []
for p, ts in per.items():
    ts.sort(reverse=True)
    m = ts[0]
    others = [t for t in ts[1:] if t[0] > 0]
    rows.append((m[1], p, m[0]/1e6, m[1]/1e6, m[4], len(others), sum(t[0] for t in others)/1e6, sum(t[4] for t in ts)))
rows.sort(reverse=True)
for r in rows[:12]:
    print(f"pid {r[1]}: main run {r[2]:.1f} ms wait {r[3]:.2f} ms nonvol {r[4]}; {r[5]} other threads ran {r[6]:.2f} ms; all nonvol {r[7]}")
import statistics
print("median main wait ms:", statistics.median(r[3] for r in rows), "max:", max(r[3] for r in rows))
print("median other-thread run ms:", statistics.median(r[6] for r in rows), "max:", max(r[6] for r in rows))
print("total main nonvol:", sum(r[4] for r in rows), "total other-thread run ms:", sum(r[6] for r in rows))
