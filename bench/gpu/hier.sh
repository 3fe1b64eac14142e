#!/usr/bin/env bash
# hier.sh: on a GPU host, time the hierarchical GPU collectives
# (coll/gpuhier.go) against the flat algorithms across pretend hosts
# (GORUN_FAKE_HOSTS: shared memory and CUDA IPC inside each, TCP between
# them), from binaries built elsewhere by bench/gpu/build.sh.
#
#   bench/gpu/hier.sh DIR OUTDIR        # from the repository root
#
# NP ranks (default: the GPU count, so one rank a GPU where there are 4 or
# more) on HOSTS pretend hosts (default 2; rank r on host r mod HOSTS),
# ROUNDS interleaved rounds (2), sizes M (4:67108864). Each collective with
# the table's choice (hier) and each flat algorithm forced; the allreduce
# also with GORUN_COLL_GPU_HIER_RAIL=0 (the leaders' form). The results of
# 2026-11-26 (np 4 on 2 H100, two ranks a GPU) are in
# bench/results/gpu-hier-2026-11-26-h100x2.txt.
set -u -o pipefail
if [ $# -lt 2 ]; then
	sed -n '2,16p' "$0"
	exit 2
fi
bin=$(realpath "$1")
out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
np=${NP:-$(nvidia-smi -L | wc -l)}
hosts=${HOSTS:-2}
m=${M:-4:67108864}
o() {
	local label=$1 coll=$2
	shift 2
	echo "## $label $coll np=$np hosts=$hosts $*"
	env GORUN_FAKE_HOSTS="$hosts" "$@" timeout 120 "$bin/gorun" -np "$np" "$bin/osu_$coll" -d cuda -m "$m" 2>&1 | grep -v '^#'
}
{
	echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
	for round in $(seq "${ROUNDS:-2}"); do
		o hier allreduce X=1
		o leaders allreduce GORUN_COLL_GPU_HIER_RAIL=0
		o ring allreduce GORUN_COLL_GPU_ALLREDUCE=ring
		o oneshot allreduce GORUN_COLL_GPU_ALLREDUCE=oneshot
		o hier bcast X=1
		o binomial bcast GORUN_COLL_GPU_BCAST=binomial
		o hier reduce X=1
		o oneshot reduce GORUN_COLL_GPU_REDUCE=oneshot
		o ring reduce GORUN_COLL_GPU_REDUCE=ring
		o hier allgather X=1
		o direct allgather GORUN_COLL_GPU_ALLGATHER=direct
		o ring allgather GORUN_COLL_GPU_ALLGATHER=ring
		o hier reduce_scatter X=1
		o oneshot reduce_scatter GORUN_COLL_GPU_REDUCE_SCATTER_BLOCK=oneshot
		o ring reduce_scatter GORUN_COLL_GPU_REDUCE_SCATTER_BLOCK=ring
	done
} | tee "$out/hier.txt"
