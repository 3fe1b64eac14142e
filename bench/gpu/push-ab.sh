#!/usr/bin/env bash
# push-ab.sh: on a GPU host, time gorun's GPU collectives with two or more
# algorithms forced, interleaved round by round, and NCCL's beside them
# (the push kernels' comparisons in coll/MEASUREMENTS.md, GPU collectives).
#
#   bench/gpu/push-ab.sh BINDIR OUTDIR ROUNDS MAXBYTES COLL=ALG,ALG... ...
#
# for example bench/gpu/push-ab.sh bin out 3 4194304 bcast=push,ipc
# reduce=push,oneshot. BINDIR holds gorun and osu_<COLL> (bench/gpu/build.sh).
# Each round runs examples/osu/<COLL> -d cuda -m 1:MAXBYTES on every GPU
# (one rank each; NP=k for fewer) once per algorithm, with
# GORUN_COLL_GPU_<COLL>=ALG; then bench/gpu/nccl_coll.py MAXBYTES runs the
# same collectives once, and bench/gpu/push_ab.py prints the medians, the
# first algorithm's time over the others' and over NCCL's. NVLink
# multicast stays off.
set -u -o pipefail
if [ $# -lt 5 ]; then
	sed -n '2,15p' "$0"
	exit 2
fi
bin=$(realpath "$1")
out=$2
rounds=$3
max=$4
shift 4
mkdir -p "$out/raw"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ng=${NP:-$(nvidia-smi -L | wc -l)}
rc=0
for i in $(seq "$rounds"); do
	for spec in "$@"; do
		c=${spec%%=*}
		name=$(echo "$c" | tr a-z A-Z)
		[ "$c" = reduce_scatter ] && name=REDUCE_SCATTER_BLOCK
		for a in $(echo "${spec#*=}" | tr , ' '); do
			env "GORUN_COLL_GPU_$name=$a" timeout 120 "$bin/gorun" -np "$ng" "$bin/osu_$c" -d cuda -m "1:$max" \
				>"$out/raw/$c-$a-$i.txt" 2>&1 || { rc=1; echo "$c $a round $i failed:"; tail -3 "$out/raw/$c-$a-$i.txt"; }
		done
	done
done
colls=$(for spec; do echo "${spec%%=*}"; done)
# shellcheck disable=SC2086
NP=$ng timeout 300 python3 bench/gpu/nccl_coll.py "$max" $colls >"$out/nccl.txt" 2>"$out/nccl.err" || { rc=1; tail -5 "$out/nccl.err"; }
python3 bench/gpu/push_ab.py "$out" "$@" || rc=1
exit $rc
