#!/usr/bin/env bash
# run-gpu-tests.sh: run gorun's GPU tests and benchmarks on a GPU host, from
# test binaries built elsewhere (the GPU host needs no Go toolchain).
#
# Build, on any x86-64 Linux machine with Go and a C compiler (cgo on):
#
#   go test -c -o gpu.test ./gpu && go test -c -o cuda.test ./gpu/cuda
#
# Run, on the GPU host:
#
#   gpu/run-gpu-tests.sh gpu.test [cuda.test] [OUTDIR]
#
# It prints `nvidia-smi topo -m`, runs every test (the GPU ones included:
# discovery against nvidia-smi, every reduce kernel against the CPU, IPC
# across two processes, peer copies), then the benchmarks three times
# (peer copy bandwidth through IPC for every GPU pair, one way and both ways;
# the reduce kernels and a device-to-device copy for the memory ceiling),
# and ends with a table of medians in GB/s. Full logs go to OUTDIR (default
# the current directory). GORUN_GPU_PTX=file tests a freshly generated PTX
# instead of the embedded one. Exit status: non-zero if a test failed.
set -u -o pipefail

if [ $# -lt 1 ]; then
	sed -n '2,22p' "$0"
	exit 2
fi
bin=$(realpath "$1")
cudabin=${2:-}
out=${3:-.}
mkdir -p "$out"
# Never let anything here use NVLink multicast (it can take the shared GPUs
# out of service); gorun itself never creates multicast objects.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rc=0

echo "== nvidia-smi topo -m"
nvidia-smi topo -m 2>&1 | tee "$out/nvidia-smi-topo.txt"

if [ -n "$cudabin" ]; then
	echo "== tests: gpu/cuda"
	"$cudabin" -test.v -test.timeout 60s >"$out/cuda-tests.log" 2>&1 || rc=1
	grep -E '^(--- |FAIL|ok|PASS)' "$out/cuda-tests.log"
fi

echo "== tests: gpu"
"$bin" -test.v -test.timeout 240s >"$out/gpu-tests.log" 2>&1 || rc=1
grep -E '^(--- |FAIL|ok|PASS)' "$out/gpu-tests.log"
# The output of each failed test, 30 lines at most.
awk '/^=== RUN/ { buf = ""; n = 0 } { if (n++ < 30) buf = buf $0 "\n" } /^[ \t]*--- FAIL/ { printf "%s", buf }' "$out/gpu-tests.log"

echo "== benchmarks: gpu (3 runs each)"
"$bin" -test.run '^$' -test.bench '^BenchmarkGPU' -test.benchtime 50x -test.count 3 \
	-test.timeout 240s >"$out/gpu-bench.log" 2>&1 || rc=1
grep -E '^(FAIL|panic|---)' "$out/gpu-bench.log"

echo "== medians, GB/s (copies: bytes moved; reduce: 2 reads + 1 write; D2D: read + write)"
awk '/^BenchmarkGPU/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkGPU/, "", name)
	for (i = 2; i <= NF; i++) if ($i == "GB/s") v[name] = v[name] " " $(i-1)
	if (!(name in seen)) { seen[name] = 1; order[++n] = name }
} END {
	for (k = 1; k <= n; k++) {
		m = split(substr(v[order[k]], 2), a, " ")
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		printf "%-48s %8.1f   (runs:%s)\n", order[k], a[int((m + 1) / 2)], v[order[k]]
	}
}' "$out/gpu-bench.log" | tee "$out/gpu-bench-summary.txt"

echo "== exit $rc"
exit $rc
