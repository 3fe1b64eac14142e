#!/usr/bin/env bash
# bin-ab.sh: on a GPU host, time two builds of gorun (before and after a
# change: each a bench/gpu/build.sh directory, optionally with a PTX to
# load through GORUN_GPU_PTX) on the GPU collectives with the tables'
# choices, interleaved round by round, and NCCL's beside them.
#
#   bench/gpu/bin-ab.sh OUTDIR ROUNDS MAXBYTES NAME=BINDIR[:PTX] NAME=BINDIR[:PTX] -- COLL...
#
# for example bench/gpu/bin-ab.sh out 3 4194304 after=b/after:b/reduce.ptx
# before=b/before -- allreduce bcast. Each round runs examples/osu/<COLL>
# -d cuda -m 1:MAXBYTES on every GPU (one rank each; NP=k for fewer) once
# per build; then bench/gpu/nccl_coll.py runs the same collectives once,
# and bench/gpu/push_ab.py prints the medians (the first build's time over
# the second's and over NCCL's). NVLink multicast stays off.
set -u -o pipefail
if [ $# -lt 6 ]; then
	sed -n '2,14p' "$0"
	exit 2
fi
out=$1
rounds=$2
max=$3
shift 3
builds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	builds+=("$1")
	shift
done
shift
mkdir -p "$out/raw"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ng=${NP:-$(nvidia-smi -L | wc -l)}
rc=0
for i in $(seq "$rounds"); do
	for c in "$@"; do
		for b in "${builds[@]}"; do
			name=${b%%=*} spec=${b#*=}
			bin=$(realpath "${spec%%:*}") ptx=
			[ "$spec" != "${spec#*:}" ] && ptx=$(realpath "${spec#*:}")
			env ${ptx:+GORUN_GPU_PTX=$ptx} timeout 120 "$bin/gorun" -np "$ng" "$bin/osu_$c" -d cuda -m "1:$max" \
				>"$out/raw/$c-$name-$i.txt" 2>&1 || { rc=1; echo "$c $name round $i failed:"; tail -3 "$out/raw/$c-$name-$i.txt"; }
		done
	done
done
# shellcheck disable=SC2068
NP=$ng timeout 300 python3 bench/gpu/nccl_coll.py "$max" $@ >"$out/nccl.txt" 2>"$out/nccl.err" || { rc=1; tail -5 "$out/nccl.err"; }
names=$(for b in "${builds[@]}"; do printf '%s,' "${b%%=*}"; done)
python3 bench/gpu/push_ab.py "$out" $(for c; do echo "$c=${names%,}"; done) || rc=1
exit $rc
