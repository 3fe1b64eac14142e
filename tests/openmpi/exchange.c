/* exchange: bench/exchange/main.go for Open MPI, the same modes and
 * figures (ns a call; waitallfree and waitall are both MPI_Waitall, which
 * frees the requests; wait and waitfree are MPI_Wait on each).
 * mpirun -np 2 exchange -m sendrecv -i 300000 */
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
	int iters = 300000, rounds = 5, size = 8, me, np;
	const char *mode = "sendrecv";
	MPI_Init(&argc, &argv);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-i"))
			iters = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-r"))
			rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-s"))
			size = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-m"))
			mode = argv[i + 1];
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	if (np != 2) {
		fprintf(stderr, "exchange runs on 2 ranks, not %d\n", np);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	int m = !strcmp(mode, "sendrecv") ? 0 : !strcmp(mode, "waitallfree") || !strcmp(mode, "waitall") ? 1 : !strcmp(mode, "wait") || !strcmp(mode, "waitfree") ? 2 : !strcmp(mode, "pingpong") ? 3 : -1;
	if (m < 0) {
		fprintf(stderr, "-m %s: not one of sendrecv, waitallfree, waitall, wait, waitfree, pingpong\n", mode);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	int peer = 1 - me;
	char *out = calloc(size ? size : 1, 1), *in = calloc(size ? size : 1, 1);
	MPI_Request reqs[2];
	for (int r = -1; r < rounds; r++) {
		int n = r < 0 ? (iters < 10000 ? iters : 10000) : iters;
		double t = now();
		for (int k = 0; k < n; k++) {
			switch (m) {
			case 0:
				MPI_Sendrecv(out, size, MPI_BYTE, peer, 1, in, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				break;
			case 1:
			case 2:
				MPI_Irecv(in, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &reqs[0]);
				MPI_Isend(out, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &reqs[1]);
				if (m == 1) {
					MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
				} else {
					MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
					MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
				}
				break;
			default:
				if (me == 0) {
					MPI_Send(out, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
					MPI_Recv(in, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else {
					MPI_Recv(in, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					MPI_Send(out, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
				}
			}
		}
		if (r >= 0 && me == 0)
			printf("%.1f ", (now() - t) / n);
	}
	if (me == 0)
		printf("ns a call (%s, %d B)\n", mode, size);
	free(out);
	free(in);
	MPI_Finalize();
	return 0;
}
