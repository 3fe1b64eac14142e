/* Intercommunicators: the world split into even and odd ranks, joined by
 * MPI_Intercomm_create (leaders: world ranks 0 and 1, tag 99), then
 * point-to-point across it, MPI_Bcast from the even group's rank 0
 * (MPI_ROOT / MPI_PROC_NULL), MPI_Allreduce (SUM), MPI_Allgather with a
 * different count per group, MPI_Allgatherv (world rank r sends r%3+1
 * ints), MPI_Reduce_scatter_block (SUM), MPI_Comm_split of the
 * intercommunicator (color (r/4)%2, key -r; an MPI_Allreduce over the
 * result, or "null" for MPI_COMM_NULL), and MPI_Intercomm_merge with the
 * even group high. Rank 0 prints one line per world rank. gorun's version is the
 * rank case "intercomm-ref" of tests/intercomm_test.go; the two must print
 * the same lines. Needs at least 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE 1024

int main(int argc, char **argv) {
    int rank, size, color, lrank, lsize, rsize, j, n;
    MPI_Comm local, inter, merged;
    char line[LINE], *all = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    color = rank % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local);
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_size(local, &lsize);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 99, &inter);
    MPI_Comm_remote_size(inter, &rsize);

    /* Point-to-point: every process sends its world rank to every remote
     * rank and sums (j+1)*value over what remote rank j sent. */
    long mine = rank, got, p2p = 0;
    MPI_Request rq[64];
    for (j = 0; j < rsize; j++)
        MPI_Isend(&mine, 1, MPI_LONG, j, 5, inter, &rq[j]);
    for (j = 0; j < rsize; j++) {
        MPI_Status st;
        MPI_Recv(&got, 1, MPI_LONG, j, 5, inter, &st);
        p2p += (j + 1) * got;
    }
    MPI_Waitall(rsize, rq, MPI_STATUSES_IGNORE);

    /* Bcast from the even group's rank 0. */
    int b[2] = {-1, -1};
    if (color == 0) {
        if (lrank == 0) { b[0] = 42; b[1] = 43; }
        MPI_Bcast(b, 2, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
    } else {
        MPI_Bcast(b, 2, MPI_INT, 0, inter);
    }

    long s[2] = {rank, (long)rank * rank}, r[2];
    MPI_Allreduce(s, r, 2, MPI_LONG, MPI_SUM, inter);

    /* Allgather: the even group sends 1 int each, the odd group 2. */
    int gs[2] = {rank * 10, rank * 10 + 1}, gr[128];
    int scount = color == 0 ? 1 : 2, rcount = color == 0 ? 2 : 1;
    MPI_Allgather(gs, scount, MPI_INT, gr, rcount, MPI_INT, inter);

    /* Allgatherv: world rank r sends r%3+1 ints r*10+i; remote rank j is
     * world rank 2j+1-color. */
    int vs[3], vr[256], vc[64], vd[64], vn = 0;
    for (j = 0; j < rank % 3 + 1; j++) vs[j] = rank * 10 + j;
    for (j = 0; j < rsize; j++) {
        vc[j] = (2 * j + 1 - color) % 3 + 1;
        vd[j] = vn;
        vn += vc[j];
    }
    MPI_Allgatherv(vs, rank % 3 + 1, MPI_INT, vr, vc, vd, MPI_INT, inter);

    /* Reduce_scatter_block: lsize*rsize longs r*100+e in both groups,
     * rsize to each process. */
    long rs[1024], rr[64];
    for (j = 0; j < lsize * rsize; j++) rs[j] = (long)rank * 100 + j;
    MPI_Reduce_scatter_block(rs, rr, rsize, MPI_LONG, MPI_SUM, inter);

    /* Split of the intercommunicator. */
    MPI_Comm sp;
    int srank = -1, srsize = -1;
    long ssum = -1, sone = rank;
    MPI_Comm_split(inter, (rank / 4) % 2, -rank, &sp);
    if (sp != MPI_COMM_NULL) {
        MPI_Comm_rank(sp, &srank);
        MPI_Comm_remote_size(sp, &srsize);
        MPI_Allreduce(&sone, &ssum, 1, MPI_LONG, MPI_SUM, sp);
        MPI_Comm_free(&sp);
    }

    int mrank;
    MPI_Intercomm_merge(inter, color == 0, &merged);
    MPI_Comm_rank(merged, &mrank);
    long mv = (long)(rank + 1) * (mrank + 1), msum;
    MPI_Allreduce(&mv, &msum, 1, MPI_LONG, MPI_SUM, merged);

    n = snprintf(line, LINE, "rank %d: color %d lrank %d rsize %d p2p %ld bcast %d %d allreduce %ld %ld allgather",
                 rank, color, lrank, rsize, p2p, b[0], b[1], r[0], r[1]);
    for (j = 0; j < rsize * rcount; j++)
        n += snprintf(line + n, LINE - n, " %d", gr[j]);
    n += snprintf(line + n, LINE - n, " allgatherv");
    for (j = 0; j < vn; j++)
        n += snprintf(line + n, LINE - n, " %d", vr[j]);
    n += snprintf(line + n, LINE - n, " rsb");
    for (j = 0; j < rsize; j++)
        n += snprintf(line + n, LINE - n, " %ld", rr[j]);
    if (srank < 0)
        n += snprintf(line + n, LINE - n, " split null");
    else
        n += snprintf(line + n, LINE - n, " split %d %d %ld", srank, srsize, ssum);
    snprintf(line + n, LINE - n, " merged %d sum %ld", mrank, msum);
    if (rank == 0) all = malloc((size_t)size * LINE);
    MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (j = 0; j < size; j++) printf("%s\n", all + (size_t)j * LINE);
        free(all);
    }
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    MPI_Finalize();
    return 0;
}
