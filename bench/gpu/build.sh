#!/usr/bin/env bash
# build.sh DIR: build what bench/gpu/run-coll.sh runs into DIR (gorun,
# tests.test and examples/osu's programs as osu_<name>), for a GPU host
# without Go. Needs Go and a C compiler (cgo on).
set -eu
dir=$1
mkdir -p "$dir"
export CGO_ENABLED=1
# Stripped: the device tool carries at most 64 MiB.
flags=(-trimpath -ldflags=-s\ -w)
go build "${flags[@]}" -o "$dir/gorun" ./cmd/gorun
go test -c "${flags[@]}" -o "$dir/tests.test" ./tests
for n in allreduce allgather reduce_scatter bcast reduce bw bibw latency; do
	go build "${flags[@]}" -o "$dir/osu_$n" "./examples/osu/$n"
done
