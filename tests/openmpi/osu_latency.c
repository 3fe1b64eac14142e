/* osu_latency.c: point-to-point latency, OSU method (gorun's own code).
 *
 * Ranks pair up as (0,1), (2,3), ...; with an odd count the last rank only
 * joins the barriers. Every pair runs a blocking ping-pong concurrently
 * (like osu_multi_lat): the even rank sends SIZE bytes and waits for SIZE
 * bytes back, skip warm-up round trips then iters timed ones; latency is
 * half the round trip averaged over the timed iterations, and rank 0 prints
 * the mean over the pairs. A barrier precedes each size.
 * Defaults: sizes 0..4 MiB; 10000 iterations + 1000 warm-up up to 8 KiB,
 * 1000 + 100 above. */
#include "osu_common.h"

#define TAG 1

int main(int argc, char **argv)
{
    struct osu_opts o = {
        .min = 0, .max = 1L << 22, .iters = 10000, .skip = 1000, .iters_l = 1000, .skip_l = 100,
    };
    int rank, nprocs;
    osu_init(&argc, &argv, &o, &rank, &nprocs);
    osu_need2("osu_latency", rank, nprocs);

    int partner = rank ^ 1;
    int active = partner < nprocs;
    int even = (rank & 1) == 0;
    int npairs = nprocs / 2;
    char *sbuf = osu_alloc((size_t)o.max, 'a');
    char *rbuf = osu_alloc((size_t)o.max, 'b');

    osu_header(rank, "Latency Test", OSU_COL_LAT);
    for (long size = o.min; size <= o.max; size = osu_next_size(size)) {
        long iters = osu_iters(&o, size), skip = osu_skip(&o, size);
        double t0 = 0.0, lat = 0.0, sum = 0.0;
        int n = (int)size;
        MPI_Barrier(MPI_COMM_WORLD);
        if (active) {
            for (long i = 0; i < iters + skip; i++) {
                if (i == skip)
                    t0 = MPI_Wtime();
                if (even) {
                    MPI_Send(sbuf, n, MPI_CHAR, partner, TAG, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, n, MPI_CHAR, partner, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, n, MPI_CHAR, partner, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, n, MPI_CHAR, partner, TAG, MPI_COMM_WORLD);
                }
            }
            if (even)
                lat = (MPI_Wtime() - t0) * 1e6 / (2.0 * (double)iters);
        }
        MPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            osu_line(size, sum / npairs);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
