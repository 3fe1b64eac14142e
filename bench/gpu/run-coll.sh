#!/usr/bin/env bash
# run-coll.sh: on a GPU host, check gorun's GPU collectives and time them
# next to NCCL, from binaries built elsewhere (the GPU host needs no Go).
#
# Build, on any x86-64 Linux machine with Go and a C compiler (cgo on):
#
#   bench/gpu/build.sh DIR        # gorun, tests.test, the osu programs
#
# Run, from the repository root on the GPU host:
#
#   bench/gpu/run-coll.sh DIR OUTDIR [MAXBYTES]
#
# It runs the GPU tests (TestGPU*: every GPU collective against its exact
# reference, point-to-point), then for allreduce, allgather,
# reduce_scatter and bcast examples/osu's program with -d cuda on every GPU
# (one rank each) and bench/gpu/nccl_coll.py with the same method, and
# allreduce again with each algorithm forced; bench/gpu/compare.py turns
# the outputs into the side-by-side table. NVLink multicast stays off.
set -u -o pipefail
if [ $# -lt 2 ]; then
	sed -n '2,19p' "$0"
	exit 2
fi
bin=$(realpath "$1")
out=$2
max=${3:-1073741824}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ng=$(nvidia-smi -L | wc -l)
rc=0

echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs), $ng GPUs"
if [ "${SKIP_TESTS:-}" != 1 ]; then
	echo "== tests"
	GORUN_TEST_GORUN=$bin/gorun timeout 540 "$bin/tests.test" -test.run '^TestGPU' -test.v -test.timeout 560s >"$out/gpu-tests.log" 2>&1 || rc=1
	grep -E '^(\s*--- |FAIL|ok|PASS)|GPU collective results exact' "$out/gpu-tests.log" | sort | uniq -c | sort -rn | head -30
	awk '/^=== RUN/ { buf = ""; n = 0 } { if (n++ < 40) buf = buf $0 "\n" } /^[ \t]*--- FAIL/ { printf "%s", buf }' "$out/gpu-tests.log" | head -80
fi

echo "== gorun, osu -d cuda, np $ng"
for c in allreduce allgather reduce_scatter bcast; do
	m=$max
	[ "$c" = allgather ] && m=$((max / ng))
	timeout 150 "$bin/gorun" -np "$ng" "$bin/osu_$c" -d cuda -m "1:$m" >"$out/gorun-$c.txt" 2>&1 || { rc=1; tail -5 "$out/gorun-$c.txt"; }
done
for a in oneshot ring; do
	GORUN_COLL_GPU_ALLREDUCE=$a timeout 150 "$bin/gorun" -np "$ng" "$bin/osu_allreduce" -d cuda -m "1:$max" >"$out/gorun-allreduce-$a.txt" 2>&1 || rc=1
done
echo "== NCCL"
timeout 200 python3 bench/gpu/nccl_coll.py "$max" >"$out/nccl.txt" 2>"$out/nccl.err" || { rc=1; tail -5 "$out/nccl.err"; }
python3 bench/gpu/compare.py "$ng" "$out" | tee "$out/summary.txt"
echo "== exit $rc"
exit $rc
