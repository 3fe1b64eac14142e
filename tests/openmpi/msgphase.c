/* msgphase: bench/msgphase/main.go for Open MPI, the same phases and
 * figures (rank 1 posts a window of Irecvs, rank 0 sends it while rank 1
 * spins on its clock, then rank 1 waits for it; ns a message each).
 * mpirun -np 2 msgphase -i 20000 */
#define _POSIX_C_SOURCE 199309L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
	int iters = 20000, win = 64, size = 8, me, np;
	MPI_Init(&argc, &argv);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-i"))
			iters = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-w"))
			win = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-s"))
			size = atoi(argv[i + 1]);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	if (np != 2) {
		fprintf(stderr, "msgphase runs on 2 ranks, not %d\n", np);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	char *buf = calloc(size > 0 ? size : 1, 1);
	MPI_Request *reqs = malloc(sizeof(MPI_Request) * win);
	double post = 0, send = 0, recv = 0;
	for (int i = 0; i < iters; i++) {
		if (me == 1) {
			double t = now();
			for (int k = 0; k < win; k++)
				MPI_Irecv(buf, size, MPI_BYTE, 0, 100, MPI_COMM_WORLD, &reqs[k]);
			post += now() - t;
		}
		MPI_Barrier(MPI_COMM_WORLD);
		if (me == 0) {
			double t = now();
			for (int k = 0; k < win; k++)
				MPI_Isend(buf, size, MPI_BYTE, 1, 100, MPI_COMM_WORLD, &reqs[k]);
			MPI_Waitall(win, reqs, MPI_STATUSES_IGNORE);
			send += now() - t;
		} else {
			double t = now();
			while (now() - t < win * 1000.0)
				;
			t = now();
			MPI_Waitall(win, reqs, MPI_STATUSES_IGNORE);
			recv += now() - t;
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	double n = (double)iters * win;
	if (me == 0) {
		printf("send %.1f ns/msg\n", send / n);
		fflush(stdout);
		MPI_Recv(buf, 0, MPI_BYTE, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Send(buf, 0, MPI_BYTE, 0, 101, MPI_COMM_WORLD);
		printf("post %.1f ns/msg recv %.1f ns/msg\n", post / n, recv / n);
	}
	free(reqs);
	free(buf);
	MPI_Finalize();
	return 0;
}
