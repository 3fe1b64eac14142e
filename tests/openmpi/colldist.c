/* colldist: bench/colldist/main.go for Open MPI, the same loops and figures
 * (allreduce of 8 B of float with a barrier before each call, back to back,
 * bcast of 8 B from rank 0 the same two ways, and barrier back to back; with -nb 1, Ibarrier then
 * Wait, Iallreduce then Wait and Iallreduce then Test until done instead; every call timed alone; percentiles per rank,
 * the largest over ranks; with -overlap B, OSU's overlap of an Iallreduce of B bytes with computation, as
 * bench/colldist/overlap.go). mpirun -np 32 colldist -i 200000 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

enum { ALLREDUCE, BCAST, BARRIER, IBARRIER, IALLREDUCE, IALLREDUCE_TEST };

static void call(int kind, float *s, float *r) {
	MPI_Request q;
	int done = 0;
	switch (kind) {
	case IBARRIER:
		MPI_Ibarrier(MPI_COMM_WORLD, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
		return;
	case IALLREDUCE:
		MPI_Iallreduce(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
		return;
	case IALLREDUCE_TEST:
		MPI_Iallreduce(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
		while (!done)
			MPI_Test(&q, &done, MPI_STATUS_IGNORE);
		return;
	}
	if (kind == BARRIER)
		MPI_Barrier(MPI_COMM_WORLD);
	else if (kind == BCAST)
		MPI_Bcast(s, 2, MPI_FLOAT, 0, MPI_COMM_WORLD);
	else
		MPI_Allreduce(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static void run(const char *name, int sep, int kind, int iters) {
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	float s[2] = {1, 2}, r[2];
	double *d = malloc(sizeof(double) * iters);
	for (int i = 0; i < 500; i++)
		call(kind, s, r);
	MPI_Barrier(MPI_COMM_WORLD);
	double start = MPI_Wtime();
	for (int i = 0; i < iters; i++) {
		if (sep)
			MPI_Barrier(MPI_COMM_WORLD);
		double t = MPI_Wtime();
		call(kind, s, r);
		d[i] = (MPI_Wtime() - t) * 1e6;
	}
	double wall = (MPI_Wtime() - start) * 1e6 / iters, mean = 0;
	for (int i = 0; i < iters; i++)
		mean += d[i];
	mean /= iters;
	qsort(d, iters, sizeof(double), cmp);
#define P(q) d[(int)((q) * (iters - 1))]
	double st[7] = {P(0.1), P(0.5), P(0.9), P(0.99), P(0.999), mean, wall}, mx[7];
	MPI_Reduce(st, mx, 7, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%-22s np=%d  maxrank: p10 %.2f p50 %.2f p90 %.2f p99 %.2f p999 %.2f mean %.2f per-iter-wall %.2f\n",
		       name, size, mx[0], mx[1], mx[2], mx[3], mx[4], mx[5], mx[6]);
	free(d);
}

/* overlap: bench/colldist/overlap.go's overlapLoop. */
static double overlap_mean(float *a, float *b, int n, int iters, double compute) {
	double sum = 0;
	for (int i = -(iters / 10 > 10 ? iters / 10 : 10); i < iters; i++) {
		if (i == 0)
			sum = 0;
		MPI_Barrier(MPI_COMM_WORLD);
		double t = MPI_Wtime();
		MPI_Request q;
		MPI_Iallreduce(a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
		while (MPI_Wtime() - t < compute)
			;
		MPI_Wait(&q, MPI_STATUS_IGNORE);
		sum += MPI_Wtime() - t;
	}
	double m = sum * 1e6 / iters;
	MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return m;
}

static void overlap(int iters, int size) {
	int rank, np, n = size / 4 > 1 ? size / 4 : 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));
	double pure = overlap_mean(a, b, n, iters, 0);
	double total = overlap_mean(a, b, n, iters, pure / 1e6);
	double ov = 100 * (1 - (total - pure) / pure);
	if (rank == 0)
		printf("iallreduce overlap %d B np=%d  pure %.2f total %.2f overlap %.1f%%\n", size, np, pure, total, ov > 0 ? ov : 0);
	free(a);
	free(b);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int iters = 20000, nb = 0, ov = 0;
	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "-i"))
			iters = atoi(argv[i + 1]);
		if (!strcmp(argv[i], "-nb"))
			nb = atoi(argv[i + 1]);
		if (!strcmp(argv[i], "-overlap"))
			ov = atoi(argv[i + 1]);
	}
	if (iters < 1)
		iters = 1;
	if (ov > 0) {
		overlap(iters, ov);
		MPI_Finalize();
		return 0;
	}
	if (nb) {
		run("ibarrier+wait b2b", 0, IBARRIER, iters);
		run("iallreduce+wait b2b", 0, IALLREDUCE, iters);
		run("iallreduce+test b2b", 0, IALLREDUCE_TEST, iters);
		MPI_Finalize();
		return 0;
	}
	run("allreduce+barrier", 1, ALLREDUCE, iters);
	run("allreduce b2b", 0, ALLREDUCE, iters);
	run("bcast+barrier", 1, BCAST, iters);
	run("bcast b2b", 0, BCAST, iters);
	run("barrier b2b", 0, BARRIER, iters);
	MPI_Finalize();
	return 0;
}
