/* Derived datatypes: MPI_Type_vector, MPI_Type_create_subarray (C and
 * Fortran order), MPI_Type_indexed, MPI_Type_create_indexed_block and
 * MPI_Type_create_resized, sent and received with other types of the same
 * signature, point to point and in MPI_Bcast, MPI_Gather, MPI_Scatter and
 * MPI_Allgather. Rank 0 prints every rank's buffers. gorun's version is
 * the rank case "layout-ref" of tests/layout_coll_test.go; the two must print
 * the same lines. Any number of ranks up to 64. */
#include "ref_out.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LR 3        /* interior rows of a rank's halo grid */
#define LC 4        /* interior columns */
#define W (LC + 2)  /* row length with the ghost columns */
#define STEPS 3

static void fill(int *b, int n, int v) {
    for (int i = 0; i < n; i++) b[i] = v;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm w = MPI_COMM_WORLD;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    /* 1. A halo exchange on a 2-D grid of ranks: rows contiguous,
     * columns as a vector; STEPS steps of a 5-point integer stencil. */
    int dims[2] = {0, 0}, periods[2] = {0, 0}, coords[2], up, down, left, right;
    MPI_Dims_create(size, 2, dims);
    MPI_Comm cart;
    MPI_Cart_create(w, 2, dims, periods, 0, &cart);
    MPI_Cart_coords(cart, rank, 2, coords);
    MPI_Cart_shift(cart, 0, 1, &up, &down);
    MPI_Cart_shift(cart, 1, 1, &left, &right);
    int u[(LR + 2) * W], v[(LR + 2) * W];
    fill(u, (LR + 2) * W, 0);
    for (int i = 0; i < LR; i++)
        for (int j = 0; j < LC; j++) {
            int gi = coords[0] * LR + i, gj = coords[1] * LC + j;
            u[(i + 1) * W + j + 1] = (gi * 31 + gj * 17) % 23;
        }
    MPI_Datatype col;
    MPI_Type_vector(LR, 1, W, MPI_INT, &col);
    MPI_Type_commit(&col);
    for (int s = 0; s < STEPS; s++) {
        MPI_Sendrecv(&u[W + 1], LC, MPI_INT, up, 1, &u[(LR + 1) * W + 1], LC, MPI_INT, down, 1, cart, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[LR * W + 1], LC, MPI_INT, down, 2, &u[1], LC, MPI_INT, up, 2, cart, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[W + 1], 1, col, left, 3, &u[W + LC + 1], 1, col, right, 3, cart, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[W + LC], 1, col, right, 4, &u[W], 1, col, left, 4, cart, MPI_STATUS_IGNORE);
        memcpy(v, u, sizeof u);
        for (int i = 1; i <= LR; i++)
            for (int j = 1; j <= LC; j++)
                v[i * W + j] = (u[i * W + j] + u[(i - 1) * W + j] + u[(i + 1) * W + j] + u[i * W + j - 1] + u[i * W + j + 1]) % 1000;
        memcpy(u, v, sizeof u);
    }
    /* The interior, packed by sending a subarray to this rank itself. */
    int sizes[2] = {LR + 2, W}, subs[2] = {LR, LC}, starts[2] = {1, 1}, mine[LR * LC];
    MPI_Datatype interior;
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &interior);
    MPI_Type_commit(&interior);
    MPI_Sendrecv(u, 1, interior, rank, 5, mine, LR * LC, MPI_INT, rank, 5, w, MPI_STATUS_IGNORE);
    out("halo", mine, LR * LC);

    /* 2. A 2x3 tile of a 4x5 C-order matrix to the next rank, received as
     * the 3x2 block at (2, 0) of a 5x4 Fortran-order one. */
    int A[20], B[20];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) A[i * 5 + j] = 100 * rank + 10 * i + j;
    fill(B, 20, -1);
    int ts[2] = {4, 5}, tsub[2] = {2, 3}, tst[2] = {1, 1};
    int fs[2] = {5, 4}, fsub[2] = {3, 2}, fst[2] = {2, 0};
    MPI_Datatype tile, ftile;
    MPI_Type_create_subarray(2, ts, tsub, tst, MPI_ORDER_C, MPI_INT, &tile);
    MPI_Type_create_subarray(2, fs, fsub, fst, MPI_ORDER_FORTRAN, MPI_INT, &ftile);
    MPI_Type_commit(&tile);
    MPI_Type_commit(&ftile);
    MPI_Sendrecv(A, 1, tile, next, 6, B, 1, ftile, prev, 6, w, MPI_STATUS_IGNORE);
    out("tile", B, 20);

    /* 3. Indexed blocks of A to the previous rank, received as an indexed
     * block type. */
    int bl[3] = {2, 1, 3}, dis[3] = {0, 5, 9}, bdis[3] = {1, 7, 13}, D[20];
    MPI_Datatype idx, iblk;
    MPI_Type_indexed(3, bl, dis, MPI_INT, &idx);
    MPI_Type_create_indexed_block(3, 2, bdis, MPI_INT, &iblk);
    MPI_Type_commit(&idx);
    MPI_Type_commit(&iblk);
    fill(D, 20, -1);
    MPI_Sendrecv(A, 1, idx, prev, 7, D, 1, iblk, next, 7, w, MPI_STATUS_IGNORE);
    out("indexed", D, 20);

    /* 4. Root's column 2 of A broadcast into column 4 of E. */
    MPI_Datatype col5;
    MPI_Type_vector(4, 1, 5, MPI_INT, &col5);
    MPI_Type_commit(&col5);
    int E[20];
    fill(E, 20, -1);
    MPI_Bcast(rank == 0 ? &A[2] : &E[4], 1, col5, 0, w);
    out("bcast", rank == 0 ? A : E, 20);

    /* 5. Four values per rank gathered as the columns of a 4 x size
     * matrix: a column type resized to one int. */
    int s4[4], G[4 * 64], H[8];
    for (int k = 0; k < 4; k++) s4[k] = rank * 10 + k;
    MPI_Datatype gcol, gcolr;
    MPI_Type_vector(4, 1, size, MPI_INT, &gcol);
    MPI_Type_create_resized(gcol, 0, sizeof(int), &gcolr);
    MPI_Type_commit(&gcolr);
    fill(G, 4 * 64, -1);
    MPI_Gather(s4, 4, MPI_INT, G, 1, gcolr, 0, w);
    out("gather", G, 4 * size);

    /* 6. The columns scattered back, each received backwards, one slot
     * apart. */
    int back[4] = {7, 5, 3, 1};
    MPI_Datatype rev;
    MPI_Type_create_indexed_block(4, 1, back, MPI_INT, &rev);
    MPI_Type_commit(&rev);
    fill(H, 8, -1);
    MPI_Scatter(G, 1, gcolr, H, 1, rev, 0, w);
    out("scatter", H, 8);

    /* 7. Every rank's column 1 of A gathered contiguously at every rank. */
    int all[4 * 64];
    fill(all, 4 * 64, -1);
    MPI_Allgather(&A[1], 1, col5, all, 4, MPI_INT, w);
    out("allgather", all, 4 * size);

    if (rank == 0) printf("done\n");
    MPI_Type_free(&col);
    MPI_Type_free(&interior);
    MPI_Type_free(&tile);
    MPI_Type_free(&ftile);
    MPI_Type_free(&idx);
    MPI_Type_free(&iblk);
    MPI_Type_free(&col5);
    MPI_Type_free(&gcol);
    MPI_Type_free(&gcolr);
    MPI_Type_free(&rev);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}
