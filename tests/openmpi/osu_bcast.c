/* osu_bcast.c: MPI_Bcast latency, OSU method (gorun's own code).
 *
 * SIZE bytes (MPI_CHAR), root 0, MPI_COMM_WORLD.
 * Method (osu_coll_run in osu_common.h): a barrier before each size; every
 * call timed alone and followed by an untimed barrier; per-rank average over
 * the timed calls; rank 0 prints the maximum over ranks, in us.
 * Defaults: sizes 1 B..1 MiB; 1000 iterations + 200 warm-up up to 8 KiB,
 * 100 + 10 above. */
#include "osu_common.h"

static void op(long size, void *ctx)
{
    MPI_Bcast(ctx, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct osu_opts o;
    int rank, nprocs;
    memset(&o, 0, sizeof o);
    osu_coll_defaults(&o, 1, 1L << 20);
    osu_init(&argc, &argv, &o, &rank, &nprocs);
    char *buf = osu_alloc((size_t)o.max, 'a');
    osu_header(rank, "Broadcast Latency Test", OSU_COL_COLL);
    osu_coll_run(&o, rank, op, buf);
    free(buf);
    MPI_Finalize();
    return 0;
}
