#!/usr/bin/env bash
# Scaling run for a lent multi-core host (no Go toolchain there): launch time
# of hello world and the collectives at np = $NPS, gorun (its defaults, and
# with GORUN_COLL_SHM=0: the point-to-point algorithms only) against Open
# MPI (its defaults), interleaved and repeated; bench/scaling_table.py turns
# the outputs into medians, spreads and ratios.
#
# Here:   bench/scaling.sh build            (builds .devbin/: gorun and the Go programs)
# There:  bench/scaling.sh run OUTDIR [REPEATS]   (builds the C references with mpicc)
#         NPS="2 8 16" BENCHES="allreduce bcast" SIZES=8:65536 ITERS=1000
#         P2P="latency bw mbw_mr" P2P_SIZES=1:1024 P2P_ITERS=...: the np=2 part,
#         point to point (P2P= skips it); SHM0=0 skips the runs with
#         GORUN_COLL_SHM=0; ALT="VAR=value ..." replaces GORUN_COLL_SHM=0
#         in those runs (an A/B of a setting; they then also run for the
#         point-to-point part), BIN_ALT=DIR runs them with the binaries of
#         DIR (an A/B of two builds; with ALT too, both differ); for bw
#         and mbw_mr the figure is
#         MB/s, so there a ratio g/o above 1 means gorun is faster;
#         MPIRUN may carry Open MPI's arguments too
#         (MPIRUN='mpirun --mca btl tcp,self': gorun then with
#         GORUN_BTL=self,tcp in the environment for a TCP-only A/B)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.devbin}
# The p runs: the binaries of BIN_ALT (else BIN's) in the environment ALT
# (else, without BIN_ALT, GORUN_COLL_SHM=0).
PBIN=${BIN_ALT:-$BIN}
PENV=${ALT-}
[ -z "${BIN_ALT:-}" ] && PENV=${ALT:-GORUN_COLL_SHM=0}
case "${1:-}" in
build)
	mkdir -p $BIN
	go build -ldflags="-s -w" -o $BIN/gorun ./cmd/gorun
	go build -ldflags="-s -w" -o $BIN/hello ./examples/hello
	for b in allreduce bcast allgather alltoall barrier reduce latency bw mbw_mr; do
		go build -ldflags="-s -w" -o $BIN/osu_$b ./examples/osu/$b
	done
	ls -la $BIN
	;;
run)
	out=${2:?OUTDIR}
	reps=${3:-3}
	mkdir -p "$out"
	ref=/tmp/gorun-ref
	make -s -C tests/openmpi OUT=$ref MPICC=${MPICC:-mpicc} >/dev/null
	MPIRUN=${MPIRUN:-mpirun}
	ncores=$(nproc)
	ompi() {
		local np=$1
		shift
		local extra=()
		[ "$np" -gt "$ncores" ] && extra=(--oversubscribe)
		$MPIRUN --allow-run-as-root "${extra[@]}" -np "$np" "$@"
	}
	# The host's steal time (ticks of all CPUs that the hypervisor gave
	# to others: the lent hosts are VMs) over each run, appended to its
	# output: scaling_table.py reports it, since it, not the runtime,
	# made most of the np=64 tails (bench/results/np64-spin-steal-*).
	steal() { awk '/^cpu /{print $9; exit}' /proc/stat 2>/dev/null || echo 0; }
	withsteal() {
		local f=$1 s0 rc=0
		shift
		s0=$(steal)
		"$@" >"$f" 2>&1 || rc=$?
		echo "# steal_ticks $(($(steal) - s0))" >>"$f"
		return $rc
	}
	ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || echo "FAILED: $*" >&2; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
	{
		echo "# launch: hello world wall time (ms), gorun vs mpirun, $reps interleaved runs"
		for np in ${NPS:-2 8 16}; do
			g=() o=()
			for i in $(seq "$reps"); do
				g+=("$(ms $BIN/gorun -np $np $BIN/hello)")
				o+=("$(ms ompi $np $ref/hello)")
			done
			echo "np=$np gorun ${g[*]} ompi ${o[*]}"
		done
	} | tee "$out/launch.txt"
	# np=2 point to point: latency, bandwidth and message rate
	# (examples/osu/mbw_mr, tests/openmpi/osu_mbw_mr.c), interleaved.
	pargs=(-m "${P2P_SIZES:-1:1024}")
	[ -n "${P2P_ITERS:-}" ] && pargs+=(-i "$P2P_ITERS")
	# One run of benchmark b at np with arguments args... as kind g
	# (gorun), p (the other build or setting) or o (Open MPI), repeat i.
	one() {
		local kind=$1 b=$2 np=$3 i=$4
		shift 4
		case $kind in
		g) withsteal "$out/g-$b-np$np-$i.txt" timeout 120 $BIN/gorun -np $np $BIN/osu_$b "$@" || echo "gorun $b np=$np failed" >&2 ;;
		p) withsteal "$out/p-$b-np$np-$i.txt" env $PENV timeout 120 $PBIN/gorun -np $np $PBIN/osu_$b "$@" || echo "gorun ($PBIN $PENV) $b np=$np failed" >&2 ;;
		o) withsteal "$out/o-$b-np$np-$i.txt" timeout 120 bash -c "$(declare -f ompi); MPIRUN=$(printf %q "$MPIRUN") ncores=$ncores ompi $np $ref/osu_$b $*" || echo "ompi $b np=$np failed" >&2 ;;
		esac
	}
	# The kinds of repeat i, in an order that turns with i: each kind
	# runs first, second and last in turn, so that none always follows
	# another (a run right after another gorun run of the same np came
	# out slower in one A/B: bench/results/bcast-piped-2026-11-28-32core.txt).
	order() {
		local kinds=(g) i=$1
		[ "$2" = 1 ] && kinds+=(p)
		kinds+=(o)
		local n=${#kinds[@]} k
		for ((k = 0; k < n; k++)); do echo -n "${kinds[$(((k + i) % n))]} "; done
	}
	p2pp=0
	[ -n "${ALT:-}${BIN_ALT:-}" ] && [ "${SHM0:-1}" = 1 ] && p2pp=1
	for b in ${P2P-latency bw mbw_mr}; do
		[ -x $BIN/osu_$b ] || continue
		for i in $(seq "$reps"); do
			for kind in $(order $i $p2pp); do one $kind $b 2 $i "${pargs[@]}"; done
		done
	done
	args=(-m "${SIZES:-8:65536}" -i "${ITERS:-1000}" -x 100)
	for np in ${NPS:-2 8 16}; do
		for b in ${BENCHES:-allreduce bcast barrier allgather reduce}; do
			[ -x $BIN/osu_$b ] || continue
			for i in $(seq "$reps"); do
				for kind in $(order $i "${SHM0:-1}"); do one $kind $b $np $i "${args[@]}"; done
			done
		done
	done
	;;
*)
	echo "usage: $0 build | run OUTDIR [REPEATS]" >&2
	exit 2
	;;
esac
