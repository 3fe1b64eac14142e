/* osu_mbw_mr.c: multiple bandwidth / message rate, OSU method (gorun's own
 * code; the twin of examples/osu/mbw_mr).
 *
 * Ranks pair up as (i, i + n/2) for i < n/2 and all pairs run concurrently;
 * with an odd count the last rank only joins the barriers. Per iteration the
 * sender (first half) posts a window of 64 MPI_Isend of SIZE bytes (all from
 * one buffer), the receiver 64 MPI_Irecv (all into one buffer); both
 * MPI_Waitall, then the receiver sends a 4-byte ack. Each sender times its
 * timed iterations; rank 0 prints the sums over pairs of
 *   MB/s = SIZE * 64 * iters / seconds / 1e6   and   messages/s.
 * A barrier precedes each size. Defaults: sizes 1..4 MiB; 100 iterations +
 * 10 warm-up up to 8 KiB, 20 + 2 above. */
#include "osu_common.h"

#define WINDOW 64
#define TAG 100
#define ACK_TAG 101

int main(int argc, char **argv)
{
    struct osu_opts o = {
        .min = 1, .max = 1L << 22, .iters = 100, .skip = 10, .iters_l = 20, .skip_l = 2,
    };
    int rank, nprocs;
    MPI_Request reqs[WINDOW];
    char ack[4] = {0, 0, 0, 0};
    osu_init(&argc, &argv, &o, &rank, &nprocs);
    osu_need2("osu_mbw_mr", rank, nprocs);

    int pairs = nprocs / 2;
    int sender = rank < pairs;
    int active = rank < 2 * pairs;
    int peer = sender ? rank + pairs : rank - pairs;
    char *sbuf = osu_alloc((size_t)o.max, 'a');
    char *rbuf = osu_alloc((size_t)o.max, 'b');

    if (rank == 0) {
        printf("# gorun-ref OSU MPI Multiple Bandwidth / Message Rate Test\n");
        printf("# [ pairs: %d ] [ window size: %d ]\n", pairs, WINDOW);
        printf("%-10s%18s%18s\n", "# Size", "MB/s", "Messages/s");
        fflush(stdout);
    }
    for (long size = o.min; size <= o.max; size = osu_next_size(size)) {
        long iters = osu_iters(&o, size), skip = osu_skip(&o, size);
        double t0 = 0.0, rate[2] = {0.0, 0.0}, sum[2] = {0.0, 0.0};
        int n = (int)size;
        MPI_Barrier(MPI_COMM_WORLD);
        if (active) {
            for (long i = 0; i < iters + skip; i++) {
                if (i == skip)
                    t0 = MPI_Wtime();
                if (sender) {
                    for (int j = 0; j < WINDOW; j++)
                        MPI_Isend(sbuf, n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, &reqs[j]);
                    MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                    MPI_Recv(ack, 4, MPI_CHAR, peer, ACK_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    for (int j = 0; j < WINDOW; j++)
                        MPI_Irecv(rbuf, n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, &reqs[j]);
                    MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                    MPI_Send(ack, 4, MPI_CHAR, peer, ACK_TAG, MPI_COMM_WORLD);
                }
            }
            if (sender) {
                double el = MPI_Wtime() - t0, msgs = (double)WINDOW * (double)iters;
                rate[0] = (double)size * msgs / el / 1e6;
                rate[1] = msgs / el;
            }
        }
        MPI_Reduce(rate, sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%-10d%18.2f%18.2f\n", (int)size, sum[0], sum[1]);
            fflush(stdout);
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
