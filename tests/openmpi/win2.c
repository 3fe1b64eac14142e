/* One-sided communication, the MPI-3 parts (gorun's twin is the rank case
 * win2-ref, tests/winref2_test.go; TestWin2AgainstOpenMPI compares the
 * outputs exactly).
 *
 * Window of 12 int64 per rank (MPI_Win_allocate) holding rank*100+i.
 * Fence epoch opened with MPI_MODE_NOPRECEDE, closed with
 * MPI_MODE_NOSUCCEED: put rank*1000+1 into element 0 of the right
 * neighbour, add rank+1 to element 7 of rank 0. Passive epoch
 * (MPI_Win_lock_all): MPI_Rget of elements 4-5 of the left neighbour,
 * MPI_Rput of -rank into element 1 of the right neighbour, MPI_Raccumulate
 * of rank+1 into element 6 of rank 0, MPI_Rget_accumulate of 1 (MPI_SUM)
 * into element 3 of the left neighbour (its old value returned), all
 * completed by MPI_Waitall; MPI_Fetch_and_op of 1 into element 2 of the
 * last rank; MPI_Compare_and_swap of rank*7 into element 8 of the right
 * neighbour when it holds its initial value (old value returned).
 * PSCW with the neighbours: put rank*10+1 into element 9 of the left
 * neighbour, the exposure ended by polling MPI_Win_test. A dynamic window
 * (MPI_Win_create_dynamic) where each rank attaches {rank, 0}, publishes
 * its address and puts rank+500 into element 1 of its right neighbour's.
 * Rank 0 prints, per rank:
 *   rank R: get G0 G1 getacc A cas C own W0..W11 dyn D0 D1
 * then "done". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 12

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int left = (me - 1 + n) % n, right = (me + 1) % n;
    int64_t *buf;
    MPI_Win win;
    MPI_Win_allocate(N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &buf, &win);
    for (int i = 0; i < N; i++) buf[i] = me * 100 + i;
    MPI_Barrier(MPI_COMM_WORLD);

    int64_t put = me * 1000 + 1, one = me + 1;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    MPI_Put(&put, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, win);
    MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 7, 1, MPI_INT64_T, MPI_SUM, win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);

    int64_t got[2], neg = -me, inc = 1, getacc, fop, cas, swap = me * 7, cmp = right * 100 + 8;
    MPI_Request q[4];
    MPI_Win_lock_all(0, win);
    MPI_Rget(got, 2, MPI_INT64_T, left, 4, 2, MPI_INT64_T, win, &q[0]);
    MPI_Rput(&neg, 1, MPI_INT64_T, right, 1, 1, MPI_INT64_T, win, &q[1]);
    MPI_Raccumulate(&one, 1, MPI_INT64_T, 0, 6, 1, MPI_INT64_T, MPI_SUM, win, &q[2]);
    MPI_Rget_accumulate(&inc, 1, MPI_INT64_T, &getacc, 1, MPI_INT64_T, left, 3, 1, MPI_INT64_T, MPI_SUM, win, &q[3]);
    MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
    MPI_Fetch_and_op(&inc, &fop, MPI_INT64_T, n - 1, 2, MPI_SUM, win);
    MPI_Compare_and_swap(&swap, &cmp, &cas, MPI_INT64_T, right, 8, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);

    MPI_Group world, nbrs;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int ranks[2] = {left, right};
    MPI_Group_incl(world, left == right ? 1 : 2, ranks, &nbrs);
    int64_t ten = me * 10 + 1;
    MPI_Win_post(nbrs, 0, win);
    MPI_Win_start(nbrs, 0, win);
    MPI_Put(&ten, 1, MPI_INT64_T, left, 9, 1, MPI_INT64_T, win);
    MPI_Win_complete(win);
    int flag = 0;
    while (!flag)
        MPI_Win_test(win, &flag);
    MPI_Barrier(MPI_COMM_WORLD);

    int64_t row[2 + 2 + N + 2];
    row[0] = got[0];
    row[1] = got[1];
    row[2] = getacc;
    row[3] = cas;
    MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win);
    MPI_Get(row + 4, N, MPI_INT64_T, me, 0, N, MPI_INT64_T, win);
    MPI_Win_unlock(me, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);

    MPI_Win dyn;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &dyn);
    int64_t d[2] = {me, 0};
    MPI_Win_attach(dyn, d, sizeof d);
    MPI_Aint addr, *addrs = malloc(sizeof(MPI_Aint) * n);
    MPI_Get_address(d, &addr);
    MPI_Allgather(&addr, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD);
    int64_t five = me + 500;
    MPI_Win_lock_all(0, dyn);
    MPI_Put(&five, 1, MPI_INT64_T, right, MPI_Aint_add(addrs[right], sizeof(int64_t)), 1, MPI_INT64_T, dyn);
    MPI_Win_unlock_all(dyn);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, me, 0, dyn); /* the others' puts are visible */
    MPI_Win_unlock(me, dyn);
    row[4 + N] = d[0];
    row[5 + N] = d[1];
    MPI_Win_detach(dyn, d);
    MPI_Win_free(&dyn);
    free(addrs);

    const int L = 2 + 2 + N + 2;
    int64_t *all = NULL;
    if (me == 0) all = malloc(sizeof row * n);
    MPI_Gather(row, L, MPI_INT64_T, all, L, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (me == 0) {
        for (int r = 0; r < n; r++) {
            int64_t *x = all + L * r;
            printf("rank %d: get %lld %lld getacc %lld cas %lld own", r, (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3]);
            for (int i = 4; i < 4 + N; i++) printf(" %lld", (long long)x[i]);
            printf(" dyn %lld %lld\n", (long long)x[4 + N], (long long)x[5 + N]);
        }
        printf("done\n");
        free(all);
    }
    MPI_Group_free(&nbrs);
    MPI_Group_free(&world);
    MPI_Finalize();
    return 0;
}
