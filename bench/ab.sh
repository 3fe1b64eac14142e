#!/bin/bash
# A/B test of two gorun builds against each other and Open MPI: OSU latency
# and bw at np=2, old, new and Open MPI interleaved, REPS times, then a table
# of medians, spreads and ratios (bench/ab.py). Made for before/after
# measurements of one change on a quiet host (the lent device hosts have no
# Go: build the binaries here, carry them there).
#
# usage (from the repository root): bench/ab.sh BINDIR OUTDIR REPS
#   BINDIR/old and BINDIR/new each hold gorun, osu_latency and osu_bw
#   (go build -o BINDIR/new/osu_bw ./examples/osu/bw, ...);
#   Open MPI's mpicc and mpirun must be on PATH.
set -u
B=$(cd "$1" && pwd); O=$2; R=$3
mkdir -p "$O/raw"
for b in latency bw; do mpicc -O2 -o "$B/ompi_$b" tests/openmpi/osu_$b.c || exit 1; done
root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
vs=(old new ompi)
for i in $(seq "$R"); do
  # The order turns each repeat (old new ompi, new ompi old, ...): a run
  # right after another gorun run came out slower in one A/B
  # (bench/results/bcast-piped-2026-11-28-32core.txt).
  for k in 0 1 2; do
    v=${vs[$(((k + i) % 3))]}
    for b in latency bw; do
      if [ $v = ompi ]; then
        mpirun "${root[@]}" -np 2 "$B/ompi_$b" -m 1:4194304 >"$O/raw/$v-$b-$i.txt" 2>&1
      else
        "$B/$v/gorun" -np 2 "$B/$v/osu_$b" -m 1:4194304 >"$O/raw/$v-$b-$i.txt" 2>&1
      fi
    done
  done
done
python3 "$(dirname "$0")/ab.py" "$O/raw"
