/* osu_rma.h: the body of osu_put_latency.c and osu_get_latency.c, the OSU
 * one-sided latency method (gorun's own code, after osu_put_latency's
 * default: MPI_Win_allocate, passive target with flush).
 *
 * Every rank allocates a window of the largest size; rank 0 locks rank
 * 1's part (shared), then issues skip warm-up and iters timed operations
 * of SIZE bytes, each followed by MPI_Win_flush, and unlocks; the latency
 * is the time per operation and flush. Ranks other than 0 only join the
 * barriers. Defaults: sizes 1..4 MiB; 10000 iterations + 1000 warm-up up
 * to 8 KiB, 1000 + 100 above. Define RMA_OP (RMA_PUT, RMA_GET, RMA_ACC:
 * MPI_Accumulate with MPI_SUM of MPI_INT, sizes from 4 bytes; RMA_FOP:
 * MPI_Fetch_and_op with MPI_SUM of one MPI_LONG_LONG, 8 bytes only) and
 * RMA_TITLE to the program's name. */
#include "osu_common.h"

#define RMA_PUT 0
#define RMA_GET 1
#define RMA_ACC 2
#define RMA_FOP 3

int main(int argc, char **argv)
{
    struct osu_opts o = {
        .min = RMA_OP == RMA_ACC ? 4 : RMA_OP == RMA_FOP ? 8 : 1,
        .max = RMA_OP == RMA_FOP ? 8 : 1L << 22, .iters = 10000, .skip = 1000, .iters_l = 1000, .skip_l = 100,
    };
    int rank, nprocs;
    osu_init(&argc, &argv, &o, &rank, &nprocs);
    osu_need2(RMA_TITLE, rank, nprocs);
    char *buf = osu_alloc((size_t)o.max, 'a');
    char *base;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)o.max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    const char *titles[] = {"Put Latency Test", "Get Latency Test", "Accumulate Latency Test", "Fetch_and_op Latency Test"};
    long long one = 1, old = 0;
    osu_header(rank, titles[RMA_OP], OSU_COL_LAT);
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
                if (RMA_OP == RMA_GET)
                    MPI_Get(buf, n, MPI_CHAR, 1, 0, n, MPI_CHAR, win);
                else if (RMA_OP == RMA_PUT)
                    MPI_Put(buf, n, MPI_CHAR, 1, 0, n, MPI_CHAR, win);
                else if (RMA_OP == RMA_ACC)
                    MPI_Accumulate(buf, n / 4, MPI_INT, 1, 0, n / 4, MPI_INT, MPI_SUM, win);
                else
                    MPI_Fetch_and_op(&one, &old, MPI_LONG_LONG, 1, 0, MPI_SUM, win);
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
