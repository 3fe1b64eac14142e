/* The line printer of the reference programs that show every rank's
 * buffers at rank 0 (neighbor, layout): out() formats this rank's line,
 * "WHAT rank R: V0 V1 ...", gathers every rank's at rank 0, which prints
 * them in rank order. The program sets rank and size after MPI_Init. */
#ifndef REF_OUT_H
#define REF_OUT_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define LINE 2048

static int rank, size;
static char line[LINE];

static void out(const char *what, const int *buf, int n) {
    int len = snprintf(line, LINE, "%s rank %d:", what, rank);
    for (int i = 0; i < n && len < LINE - 16; i++) len += snprintf(line + len, LINE - len, " %d", buf[i]);
    char *all = rank == 0 ? malloc((size_t)LINE * size) : NULL;
    MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++) printf("%s\n", all + (size_t)r * LINE);
        free(all);
    }
}
#endif
