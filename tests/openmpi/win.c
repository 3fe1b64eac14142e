/* One-sided communication (MPI RMA windows): gorun's twin is the rank
 * case win-ref (tests/win_test.go); TestWinAgainstOpenMPI compares the
 * outputs exactly.
 *
 * Each rank exposes 8 int64 (MPI_Win_create, disp_unit 8) holding
 * rank*100+i. Fence epoch: put {rank*1000+1, rank*1000+2} at element 0 of
 * the right neighbour, get elements 4 and 5 of the left neighbour, add
 * rank+1 to element 7 of rank 0 (MPI_SUM) and MPI_MAX rank*10 into
 * element 6 of the right neighbour. Fence. Passive epochs: every rank
 * locks every rank exclusively in turn and adds rank+1 to element 3, then
 * MPI_REPLACEs element 2 of the left neighbour with -rank under a shared
 * lock. Barrier. Each rank reads its own window and its right neighbour's
 * under a shared lock (MPI_Get). Rank 0 prints, per rank:
 *   rank R: got G0 G1 own W0..W7 right V0..V7
 * then "done". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int left = (me - 1 + n) % n, right = (me + 1) % n;
    int64_t buf[8];
    for (int i = 0; i < 8; i++) buf[i] = me * 100 + i;
    MPI_Win win;
    MPI_Win_create(buf, sizeof buf, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win);

    int64_t put[2] = {me * 1000 + 1, me * 1000 + 2}, got[2], one = me + 1, mx = me * 10;
    MPI_Win_fence(0, win);
    MPI_Put(put, 2, MPI_INT64_T, right, 0, 2, MPI_INT64_T, win);
    MPI_Get(got, 2, MPI_INT64_T, left, 4, 2, MPI_INT64_T, win);
    MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 7, 1, MPI_INT64_T, MPI_SUM, win);
    MPI_Accumulate(&mx, 1, MPI_INT64_T, right, 6, 1, MPI_INT64_T, MPI_MAX, win);
    MPI_Win_fence(0, win);

    for (int k = 0; k < n; k++) {
        int t = (me + k) % n;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
        MPI_Accumulate(&one, 1, MPI_INT64_T, t, 3, 1, MPI_INT64_T, MPI_SUM, win);
        MPI_Win_unlock(t, win);
    }
    int64_t neg = -me;
    MPI_Win_lock(MPI_LOCK_SHARED, left, 0, win);
    MPI_Accumulate(&neg, 1, MPI_INT64_T, left, 2, 1, MPI_INT64_T, MPI_REPLACE, win);
    MPI_Win_unlock(left, win);
    MPI_Barrier(MPI_COMM_WORLD);

    int64_t row[18];
    row[0] = got[0];
    row[1] = got[1];
    MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win);
    MPI_Get(row + 2, 8, MPI_INT64_T, me, 0, 8, MPI_INT64_T, win);
    MPI_Win_unlock(me, win);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_Get(row + 10, 8, MPI_INT64_T, right, 0, 8, MPI_INT64_T, win);
    MPI_Win_unlock(right, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);

    int64_t *all = NULL;
    if (me == 0) all = malloc(sizeof row * n);
    MPI_Gather(row, 18, MPI_INT64_T, all, 18, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (me == 0) {
        for (int r = 0; r < n; r++) {
            int64_t *x = all + 18 * r;
            printf("rank %d: got %lld %lld own", r, (long long)x[0], (long long)x[1]);
            for (int i = 2; i < 10; i++) printf(" %lld", (long long)x[i]);
            printf(" right");
            for (int i = 10; i < 18; i++) printf(" %lld", (long long)x[i]);
            printf("\n");
        }
        printf("done\n");
        free(all);
    }
    MPI_Finalize();
    return 0;
}
