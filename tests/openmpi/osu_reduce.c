/* osu_reduce.c: MPI_Reduce latency, OSU method (gorun's own code).
 *
 * SIZE bytes of float32 (count SIZE/4), MPI_SUM, root 0, MPI_COMM_WORLD.
 * Method (osu_coll_run in osu_common.h): a barrier before each size; every
 * call timed alone and followed by an untimed barrier; per-rank average over
 * the timed calls; rank 0 prints the maximum over ranks, in us.
 * Defaults: sizes 4 B..1 MiB (a smaller MIN is raised to 4); 1000 iterations
 * + 200 warm-up up to 8 KiB, 100 + 10 above. */
#include "osu_common.h"

struct bufs {
    float *s, *r;
};

static void op(long size, void *ctx)
{
    struct bufs *b = ctx;
    MPI_Reduce(b->s, b->r, (int)(size / 4), MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct osu_opts o;
    struct bufs b;
    int rank, nprocs;
    memset(&o, 0, sizeof o);
    osu_coll_defaults(&o, 4, 1L << 20);
    osu_init(&argc, &argv, &o, &rank, &nprocs);
    if (o.min < 4)
        o.min = 4;
    b.s = (float *)osu_alloc((size_t)o.max, 0);
    b.r = (float *)osu_alloc((size_t)o.max, 0);
    for (long i = 0; i < o.max / 4; i++)
        b.s[i] = 1.0f;
    osu_header(rank, "Reduce Latency Test", OSU_COL_COLL);
    osu_coll_run(&o, rank, op, &b);
    free(b.s);
    free(b.r);
    MPI_Finalize();
    return 0;
}
