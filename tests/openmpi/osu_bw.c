/* osu_bw.c: unidirectional bandwidth, OSU method (gorun's own code).
 *
 * Ranks pair up as (0,1), (2,3), ... and all pairs run concurrently; with an
 * odd count the last rank only joins the barriers. Per iteration the even
 * rank posts a window of 64 MPI_Isend of SIZE bytes (all from one buffer),
 * the odd rank 64 MPI_Irecv (all into one buffer); both MPI_Waitall, then the
 * odd rank sends a 4-byte ack that the even rank receives. Timed on the even
 * rank from the first timed iteration to the last ack:
 *   MB/s = SIZE * 64 * iters / seconds / 1e6
 * rank 0 prints the mean over the pairs. A barrier precedes each size.
 * Defaults: sizes 1..4 MiB; 100 iterations + 10 warm-up up to 8 KiB,
 * 20 + 2 above. */
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
    osu_need2("osu_bw", rank, nprocs);

    int partner = rank ^ 1;
    int active = partner < nprocs;
    int even = (rank & 1) == 0;
    int npairs = nprocs / 2;
    char *sbuf = osu_alloc((size_t)o.max, 'a');
    char *rbuf = osu_alloc((size_t)o.max, 'b');

    osu_header(rank, "Bandwidth Test", OSU_COL_BW);
    for (long size = o.min; size <= o.max; size = osu_next_size(size)) {
        long iters = osu_iters(&o, size), skip = osu_skip(&o, size);
        double t0 = 0.0, bw = 0.0, sum = 0.0;
        int n = (int)size;
        MPI_Barrier(MPI_COMM_WORLD);
        if (active) {
            for (long i = 0; i < iters + skip; i++) {
                if (i == skip)
                    t0 = MPI_Wtime();
                if (even) {
                    for (int j = 0; j < WINDOW; j++)
                        MPI_Isend(sbuf, n, MPI_CHAR, partner, TAG, MPI_COMM_WORLD, &reqs[j]);
                    MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                    MPI_Recv(ack, 4, MPI_CHAR, partner, ACK_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    for (int j = 0; j < WINDOW; j++)
                        MPI_Irecv(rbuf, n, MPI_CHAR, partner, TAG, MPI_COMM_WORLD, &reqs[j]);
                    MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                    MPI_Send(ack, 4, MPI_CHAR, partner, ACK_TAG, MPI_COMM_WORLD);
                }
            }
            if (even)
                bw = (double)size * WINDOW * (double)iters / (MPI_Wtime() - t0) / 1e6;
        }
        MPI_Reduce(&bw, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            osu_line(size, sum / npairs);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
