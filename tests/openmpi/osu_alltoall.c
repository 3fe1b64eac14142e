/* osu_alltoall.c: MPI_Alltoall latency, OSU method (gorun's own code).
 *
 * Every rank sends SIZE bytes (MPI_CHAR) to every rank, itself included;
 * send and receive buffers hold SIZE * nprocs bytes.
 * Method (osu_coll_run in osu_common.h): a barrier before each size; every
 * call timed alone and followed by an untimed barrier; per-rank average over
 * the timed calls; rank 0 prints the maximum over ranks, in us.
 * Defaults: sizes 1 B..1 MiB; 1000 iterations + 200 warm-up up to 8 KiB,
 * 100 + 10 above. */
#include "osu_common.h"

struct bufs {
    char *s, *r;
};

static void op(long size, void *ctx)
{
    struct bufs *b = ctx;
    MPI_Alltoall(b->s, (int)size, MPI_CHAR, b->r, (int)size, MPI_CHAR, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct osu_opts o;
    struct bufs b;
    int rank, nprocs;
    memset(&o, 0, sizeof o);
    osu_coll_defaults(&o, 1, 1L << 20);
    osu_init(&argc, &argv, &o, &rank, &nprocs);
    b.s = osu_alloc((size_t)o.max * (size_t)nprocs, 'a');
    b.r = osu_alloc((size_t)o.max * (size_t)nprocs, 'b');
    osu_header(rank, "All-to-All Latency Test", OSU_COL_COLL);
    osu_coll_run(&o, rank, op, &b);
    free(b.s);
    free(b.r);
    MPI_Finalize();
    return 0;
}
