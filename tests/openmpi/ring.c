/* ring.c: gorun's Open MPI reference for examples/ring.
 *
 * Usage: ring [ROUNDS]   (default 3)
 *
 * An int64 token starts at 0 on rank 0. In each round rank 0 sends it to
 * rank 1 (tag 1); every rank r, rank 0 included when the token comes back,
 * adds r+1 on receipt and passes it to (r+1)%size. After each round rank 0
 * prints "round K: token T" (K from 1), and after the last one
 * "ring done after K rounds: token T". One round adds size*(size+1)/2, so
 * after K rounds T = K*size*(size+1)/2. With size 1 rank 0 passes the token
 * to itself with MPI_Sendrecv. Only rank 0 prints. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG 1

int main(int argc, char **argv)
{
    int rank, size;
    long rounds = 3;
    int64_t token = 0, in;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        char *end;
        rounds = strtol(argv[1], &end, 10);
        if (*end != '\0' || end == argv[1] || rounds < 1) {
            if (rank == 0)
                fprintf(stderr, "usage: ring [ROUNDS]  (ROUNDS >= 1)\n");
            MPI_Finalize();
            return 1;
        }
    }

    for (long k = 1; k <= rounds; k++) {
        if (rank == 0) {
            if (size == 1) {
                MPI_Sendrecv(&token, 1, MPI_INT64_T, 0, TAG, &in, 1, MPI_INT64_T, 0, TAG,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Send(&token, 1, MPI_INT64_T, 1, TAG, MPI_COMM_WORLD);
                MPI_Recv(&in, 1, MPI_INT64_T, size - 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            token = in + 1;
            printf("round %ld: token %lld\n", k, (long long)token);
        } else {
            MPI_Recv(&in, 1, MPI_INT64_T, rank - 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token = in + rank + 1;
            MPI_Send(&token, 1, MPI_INT64_T, (rank + 1) % size, TAG, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) {
        printf("ring done after %ld rounds: token %lld\n", rounds, (long long)token);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
