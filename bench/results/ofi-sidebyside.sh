#!/usr/bin/env bash
# Side by side, np=2: gorun over btl/ofi (libfabric's tcp provider), gorun
# over btl/tcp, and Open MPI over mtl/ofi (pml cm, the same tcp provider),
# OSU latency and bandwidth, interleaved and repeated; prints the medians
# and the ratios (bench/results/ofi-*.txt were made with it).
#
#   bench/results/ofi-sidebyside.sh OUTDIR [REPEATS]             # one host, loopback
#   SSHCFG=cfg H1=h1 H2=h2 NET=10.77.0.0/24 bench/results/ofi-sidebyside.sh OUTDIR
#                                      # two network-namespace hosts (tests/netns_test.go's bed,
#                                      # kept up with GORUN_TEST_NETNS_HOLD)
set -euo pipefail
out=${1:?outdir}; reps=${2:-5}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cd "$root"
go build -o "$bin/gorun" ./cmd/gorun
for b in latency bw; do
	go build -tags ofi -o "$bin/go_$b" ./examples/osu/$b
	mpicc.openmpi -O2 -o "$bin/c_$b" tests/openmpi/osu_$b.c
done
gflags=(-np 2); oflags=(-np 2)
if [ -n "${H1:-}" ]; then
	gflags+=(--ssh-config "$SSHCFG" -H "$H1:1,$H2:1")
	oflags+=(--host "$H1,$H2" --mca plm_rsh_agent "ssh -F $SSHCFG" --mca oob_tcp_if_include "$NET" --mca btl_tcp_if_include "$NET")
	where=netns
else
	where=loopback
fi
ompi=(mpirun.openmpi --allow-run-as-root "${oflags[@]}" --mca pml cm --mca mtl ofi
	--mca mtl_ofi_provider_include "tcp;ofi_rxm" -x FI_PROVIDER=tcp)
[ -n "${H1:-}" ] && ompi+=(-x "FI_TCP_IFACE=${IFACE:-eth0}")
# OMPI=tcp: Open MPI over its own TCP transport (pml ob1, btl tcp) instead:
# between the namespace hosts its mtl/ofi on the tcp provider took 4 ms per
# message (2026-11-23), too slow to sweep.
[ "${OMPI:-ofi}" = tcp ] && ompi=(mpirun.openmpi --allow-run-as-root "${oflags[@]}" --mca pml ob1 --mca btl tcp,self)
args_latency="-m 1:1048576"
args_bw="-m 8:4194304"
for r in $(seq "$reps"); do
	for b in latency bw; do
		a=args_$b
		env GORUN_BTL=ofi,self GORUN_OFI_PROVIDER="tcp;ofi_rxm" "$bin/gorun" "${gflags[@]}" "$bin/go_$b" ${!a} >"$out/$where-$b-gorun-ofi.$r"
		env GORUN_BTL=tcp,self "$bin/gorun" "${gflags[@]}" "$bin/go_$b" ${!a} >"$out/$where-$b-gorun-tcp.$r"
		"${ompi[@]}" "$bin/c_$b" ${!a} >"$out/$where-$b-ompi-ofi.$r"
	done
	echo "repeat $r done" >&2
done
python3 - "$out" "$where" <<'PY'
import sys, glob, statistics
out, where = sys.argv[1], sys.argv[2]
for b, unit in (("latency", "us"), ("bw", "MB/s")):
    med = {}
    for side in ("gorun-ofi", "gorun-tcp", "ompi-ofi"):  # ompi-ofi: Open MPI's run, ofi or tcp (OMPI)
        runs = {}
        for f in glob.glob(f"{out}/{where}-{b}-{side}.*"):
            for line in open(f):
                p = line.split()
                if len(p) == 2 and not line.startswith("#"):
                    runs.setdefault(int(p[0]), []).append(float(p[1]))
        med[side] = {k: statistics.median(v) for k, v in runs.items()}
    print(f"# {where} np=2 osu {b} ({unit}), medians of {len(glob.glob(f'{out}/{where}-{b}-gorun-ofi.*'))} interleaved repeats")
    print(f"{'size':>8} {'gorun ofi':>10} {'gorun tcp':>10} {'ompi ofi':>10} {'ofi/tcp':>8} {'ofi/ompi':>9}")
    for k in sorted(med["gorun-ofi"]):
        g, t, o = med["gorun-ofi"][k], med["gorun-tcp"].get(k, float("nan")), med["ompi-ofi"].get(k, float("nan"))
        print(f"{k:>8} {g:>10.2f} {t:>10.2f} {o:>10.2f} {g/t:>8.2f} {g/o:>9.2f}")
    print()
PY
