/* osu_barrier.c: MPI_Barrier latency, OSU method (gorun's own code).
 *
 * A barrier, then iters+skip MPI_Barrier calls back to back, each timed
 * alone; per-rank average over the timed calls; rank 0 prints the maximum
 * over ranks, in us, as one line of size 0. -m is accepted and ignored.
 * Defaults: 1000 iterations + 200 warm-up. */
#include "osu_common.h"

int main(int argc, char **argv)
{
    struct osu_opts o;
    int rank, nprocs;
    double timer = 0.0, avg, max = 0.0;
    memset(&o, 0, sizeof o);
    osu_coll_defaults(&o, 0, 0);
    o.no_sizes = 1;
    osu_init(&argc, &argv, &o, &rank, &nprocs);
    osu_header(rank, "Barrier Latency Test", OSU_COL_COLL);
    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < o.iters + o.skip; i++) {
        double t0 = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        double t1 = MPI_Wtime();
        if (i >= o.skip)
            timer += t1 - t0;
    }
    avg = timer * 1e6 / (double)o.iters;
    MPI_Reduce(&avg, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        osu_line(0, max);
    MPI_Finalize();
    return 0;
}
