# Summarises bench/ab.sh raw outputs (files VARIANT-BENCH-REPEAT.txt in OSU format): medians per size.
import sys, glob, os, statistics, collections
d = collections.defaultdict(list)
for f in glob.glob(os.path.join(sys.argv[1], '*.txt')):
    v, b, _ = os.path.basename(f).split('-')
    for l in open(f):
        p = l.split()
        if len(p) == 2 and not l.startswith('#'):
            try: d[(v, b, int(p[0]))].append(float(p[1]))
            except ValueError: pass
for b, unit in (('latency', 'us, lower is better'), ('bw', 'MB/s, higher is better')):
    print(f'## {b} ({unit}); medians of {len(d[("new", b, 8)])}; spread = (max-min)/median')
    print('%8s %10s %6s %10s %6s %10s %6s %8s %9s %9s' % ('size', 'old', 'spr', 'new', 'spr', 'ompi', 'spr', 'new/old', 'old/ompi', 'new/ompi'))
    for s in sorted({k[2] for k in d if k[1] == b}):
        m = {}; sp = {}
        for v in ('old', 'new', 'ompi'):
            xs = d.get((v, b, s), [])
            m[v] = statistics.median(xs) if xs else float('nan')
            sp[v] = (max(xs) - min(xs)) / m[v] * 100 if xs and m[v] else float('nan')
        print('%8d %10.2f %5.0f%% %10.2f %5.0f%% %10.2f %5.0f%% %8.2f %9.2f %9.2f' % (s, m['old'], sp['old'], m['new'], sp['new'], m['ompi'], sp['ompi'], m['new'] / m['old'], m['old'] / m['ompi'], m['new'] / m['ompi']))
    print()
