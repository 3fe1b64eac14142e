/* Persistent requests (MPI_Send_init, MPI_Recv_init, MPI_Startall,
 * MPI_Request_free) around a ring, then MPI_Sendrecv_replace shifting by
 * two; rank 0 prints what every rank ended with. gorun's version is the
 * rank case "persist-ring" of tests/mpi16_test.go; the two must print the
 * same lines. Usage: persist [rounds] (default 5). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, k, i, rounds = argc > 1 ? atoi(argv[1]) : 5;
    double x[4], y[4], *allx = NULL;
    int v[3], *allv = NULL;
    MPI_Request rq[2];
    MPI_Status st[2], s;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 0; i < 4; i++) x[i] = rank * 10 + i;
    MPI_Send_init(x, 4, MPI_DOUBLE, (rank + 1) % size, 3, MPI_COMM_WORLD, &rq[0]);
    MPI_Recv_init(y, 4, MPI_DOUBLE, (rank - 1 + size) % size, 3, MPI_COMM_WORLD, &rq[1]);
    for (k = 0; k < rounds; k++) {
        MPI_Startall(2, rq);
        MPI_Waitall(2, rq, st);
        for (i = 0; i < 4; i++) x[i] = y[i] * 0.5 + k + i;
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);

    v[0] = rank; v[1] = rank * rank; v[2] = -rank;
    for (k = 0; k < rounds; k++) {
        MPI_Sendrecv_replace(v, 3, MPI_INT, (rank + 2) % size, 7, (rank - 2 + 2 * size) % size, 7,
                             MPI_COMM_WORLD, &s);
        v[0] += k;
    }

    if (rank == 0) {
        allx = malloc(sizeof(double) * 4 * size);
        allv = malloc(sizeof(int) * 3 * size);
    }
    MPI_Gather(x, 4, MPI_DOUBLE, allx, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(v, 3, MPI_INT, allv, 3, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (i = 0; i < size; i++)
            printf("rank %d: x %.17g %.17g %.17g %.17g v %d %d %d\n", i, allx[4 * i], allx[4 * i + 1],
                   allx[4 * i + 2], allx[4 * i + 3], allv[3 * i], allv[3 * i + 1], allv[3 * i + 2]);
        free(allx);
        free(allv);
    }
    MPI_Finalize();
    return 0;
}
