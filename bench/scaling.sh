#!/usr/bin/env bash
# Scaling run for the 64-core GPU host (no Go toolchain there): launch time
# of hello world and the collectives at np = 16, 32, 64, gorun against Open
# MPI, interleaved and repeated; medians go to $OUT.
#
# Here:   bench/scaling.sh build            (builds .devbin/: gorun and the Go programs)
# There:  bench/scaling.sh run OUTDIR [REPEATS]   (builds the C references with mpicc)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.devbin
case "${1:-}" in
build)
	mkdir -p $BIN
	go build -ldflags="-s -w" -o $BIN/gorun ./cmd/gorun
	go build -ldflags="-s -w" -o $BIN/hello ./examples/hello
	for b in allreduce bcast allgather alltoall; do
		[ -d examples/osu/$b ] && go build -ldflags="-s -w" -o $BIN/osu_$b ./examples/osu/$b
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
	ompi() { $MPIRUN --allow-run-as-root --oversubscribe --bind-to none -np "$@"; }
	ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || echo "FAILED: $*" >&2; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
	{
		echo "# launch: hello world wall time (ms), gorun vs mpirun, $reps interleaved runs"
		for np in 2 16 32 64; do
			g=() o=()
			for i in $(seq "$reps"); do
				g+=("$(ms $BIN/gorun -np $np $BIN/hello)")
				o+=("$(ms ompi $np $ref/hello)")
			done
			echo "np=$np gorun ${g[*]} ompi ${o[*]}"
		done
	} | tee "$out/launch.txt"
	for np in 16 32 64; do
		for b in ${BENCHES:-allreduce bcast allgather alltoall}; do
			[ -x $BIN/osu_$b ] || continue
			for i in $(seq "$reps"); do
				timeout 120 $BIN/gorun -np $np $BIN/osu_$b -m ${SIZES:-8:65536} -i ${ITERS:-100} -x 10 >"$out/g-$b-np$np-$i.txt" 2>&1 || echo "gorun $b np=$np failed" >&2
				timeout 120 bash -c "$MPIRUN --allow-run-as-root --oversubscribe --bind-to none -np $np $ref/osu_$b -m ${SIZES:-8:65536} -i ${ITERS:-100} -x 10" >"$out/o-$b-np$np-$i.txt" 2>&1 || echo "ompi $b np=$np failed" >&2
			done
		done
	done
	;;
*)
	echo "usage: $0 build | run OUTDIR [REPEATS]" >&2
	exit 2
	;;
esac
