/* Neighbourhood collectives (MPI_Neighbor_allgather(v),
 * MPI_Neighbor_alltoall(v)) on Cartesian grids of every periodicity and on
 * a distributed graph with repeated, self and one-way edges
 * (MPI_Dist_graph_create_adjacent); rank 0 prints every rank's receive
 * buffers, blocks of PROC_NULL neighbours and gaps left at -7. gorun's
 * version is the rank case "neighbor-ref" of tests/neighbor_test.go; the
 * two must print the same lines. Needs an even number of ranks. */
#include "ref_out.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNSET (-7)

static int vcount(int r, int b) { return 1 + (r + b) % 3; }

/* run does the four collectives on c, whose rank me has the given
 * sources (src[i] < 0: PROC_NULL) and destinations, from[i] being the
 * index under which source i sends its block to this rank. */
static void run(MPI_Comm c, const char *label, int me, int indeg, const int *src, const int *from, int outdeg) {
    char what[128];
    int send[64], recv[256], sc[32], sd[32], rc[32], rd[32], total, i, j;
    for (j = 0; j < 2; j++) send[j] = me * 10 + j;
    for (i = 0; i < 256; i++) recv[i] = UNSET;
    MPI_Neighbor_allgather(send, 2, MPI_INT, recv, 2, MPI_INT, c);
    snprintf(what, sizeof what, "%s allgather", label);
    out(what, recv, 2 * indeg);

    for (i = 0; i < outdeg; i++)
        for (j = 0; j < 2; j++) send[2 * i + j] = me * 100 + i * 10 + j;
    for (i = 0; i < 256; i++) recv[i] = UNSET;
    MPI_Neighbor_alltoall(send, 2, MPI_INT, recv, 2, MPI_INT, c);
    snprintf(what, sizeof what, "%s alltoall", label);
    out(what, recv, 2 * indeg);

    /* v forms: blocks placed backwards, a gap of one after each. */
    total = 0;
    for (i = indeg - 1; i >= 0; i--) {
        rc[i] = src[i] >= 0 ? vcount(src[i], 0) : 2;
        rd[i] = total;
        total += rc[i] + 1;
    }
    for (j = 0; j < vcount(me, 0); j++) send[j] = me * 10 + j;
    for (i = 0; i < 256; i++) recv[i] = UNSET;
    MPI_Neighbor_allgatherv(send, vcount(me, 0), MPI_INT, recv, rc, rd, MPI_INT, c);
    snprintf(what, sizeof what, "%s allgatherv", label);
    out(what, recv, total);

    int stotal = 0;
    for (i = outdeg - 1; i >= 0; i--) {
        sc[i] = vcount(me, i);
        sd[i] = stotal;
        for (j = 0; j < sc[i]; j++) send[stotal + j] = me * 100 + i * 10 + j;
        stotal += sc[i] + 1;
    }
    total = 0;
    for (i = indeg - 1; i >= 0; i--) {
        rc[i] = src[i] >= 0 ? vcount(src[i], from[i]) : 1;
        rd[i] = total;
        total += rc[i] + 1;
    }
    for (i = 0; i < 256; i++) recv[i] = UNSET;
    MPI_Neighbor_alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, c);
    snprintf(what, sizeof what, "%s alltoallv", label);
    out(what, recv, total);
}

/* dests is rank r's destinations in the graph (as nbDests in Go). */
static int dests(int r, int n, int *d) {
    switch (r % 3) {
    case 0:
        d[0] = (r + 1) % n; d[1] = (r + 1) % n; d[2] = r; d[3] = (r + 3) % n;
        return 4;
    case 1:
        d[0] = (r + 2) % n;
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size % 2 != 0) {
        if (rank == 0) fprintf(stderr, "neighbor: needs an even number of ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int shapes[][2] = {{size, 0}, {2, size / 2}, {size / 2, 2}, {1, size}};
    for (int s = 0; s < 4; s++) {
        int nd = shapes[s][1] ? 2 : 1;
        for (int mask = 0; mask < (1 << nd); mask++) {
            int periods[2] = {mask & 1, (mask >> 1) & 1}, src[4], from[4];
            char label[64];
            MPI_Comm c;
            MPI_Cart_create(MPI_COMM_WORLD, nd, shapes[s], periods, 0, &c);
            for (int d = 0; d < nd; d++) {
                MPI_Cart_shift(c, d, 1, &src[2 * d], &src[2 * d + 1]);
                from[2 * d] = 2 * d + 1;
                from[2 * d + 1] = 2 * d;
            }
            for (int i = 0; i < 2 * nd; i++)
                if (src[i] == MPI_PROC_NULL) src[i] = -1;
            if (nd == 1) snprintf(label, sizeof label, "cart %d p%d", shapes[s][0], periods[0]);
            else snprintf(label, sizeof label, "cart %dx%d p%d%d", shapes[s][0], shapes[s][1], periods[0], periods[1]);
            run(c, label, rank, 2 * nd, src, from, 2 * nd);
            MPI_Comm_free(&c);
        }
    }

    /* The graph: sources are the ranks that list this one, once per
     * listing, highest rank first. */
    int dst[4], outdeg = dests(rank, size, dst), src[64], from[64], indeg = 0;
    for (int s = size - 1; s >= 0; s--) {
        int d[4], k = dests(s, size, d);
        for (int j = 0; j < k; j++)
            if (d[j] == rank) {
                src[indeg] = s;
                from[indeg++] = j;
            }
    }
    MPI_Comm g;
    /* Open MPI declares MPI_UNWEIGHTED as an array of size 0, which gcc
     * takes for a buffer it would read past. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, indeg, src, MPI_UNWEIGHTED, outdeg, dst, MPI_UNWEIGHTED,
                                   MPI_INFO_NULL, 0, &g);
#pragma GCC diagnostic pop
    run(g, "graph", rank, indeg, src, from, outdeg);
    MPI_Comm_free(&g);
    if (rank == 0) printf("done\n");
    MPI_Finalize();
    return 0;
}
