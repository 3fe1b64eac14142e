/* osu_rma.h: the body of osu_put_latency.c and osu_get_latency.c, the OSU
 * one-sided latency method (gorun's own code, after osu_put_latency's
 * default: MPI_Win_allocate, passive target with flush).
 *
 * Every rank allocates a window of the largest size; rank 0 locks rank
 * 1's part (shared), then issues skip warm-up and iters timed operations
 * of SIZE bytes, each followed by MPI_Win_flush, and unlocks; the latency
 * is the time per operation and flush. Ranks other than 0 only join the
 * barriers. Defaults: sizes 1..4 MiB; 10000 iterations + 1000 warm-up up
 * to 8 KiB, 1000 + 100 above. Define RMA_GET to 1 for Get, 0 for Put and
 * RMA_TITLE to the title. */
#include "osu_common.h"

int main(int argc, char **argv)
{
    struct osu_opts o = {
        .min = 1, .max = 1L << 22, .iters = 10000, .skip = 1000, .iters_l = 1000, .skip_l = 100,
    };
    int rank, nprocs;
    osu_init(&argc, &argv, &o, &rank, &nprocs);
    osu_need2(RMA_TITLE, rank, nprocs);
    char *buf = osu_alloc((size_t)o.max, 'a');
    char *base;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)o.max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    osu_header(rank, RMA_GET ? "Get Latency Test" : "Put Latency Test", OSU_COL_LAT);
    for (long size = o.min; size <= o.max; size = osu_next_size(size)) {
        long iters = osu_iters(&o, size), skip = osu_skip(&o, size);
        int n = (int)size;
        double t0 = 0.0, lat = 0.0;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            for (long i = 0; i < iters + skip; i++) {
                if (i == skip)
                    t0 = MPI_Wtime();
                if (RMA_GET)
                    MPI_Get(buf, n, MPI_CHAR, 1, 0, n, MPI_CHAR, win);
                else
                    MPI_Put(buf, n, MPI_CHAR, 1, 0, n, MPI_CHAR, win);
                MPI_Win_flush(1, win);
            }
            lat = (MPI_Wtime() - t0) * 1e6 / (double)iters;
            MPI_Win_unlock(1, win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            osu_line(size, lat);
    }
    MPI_Win_free(&win);
    free(buf);
    MPI_Finalize();
    return 0;
}
