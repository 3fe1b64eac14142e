/* pi.c: gorun's Open MPI reference for examples/pi (the classic cpi).
 *
 * Usage: pi [N]   (intervals, default 1000000)
 *
 * Rank 0 broadcasts N (int64); h = 1.0/N; each rank sums
 * f(h*((double)i - 0.5)) for i = rank+1, rank+1+size, ... <= N with
 * f(x) = 4/(1+x*x), in increasing i; mypi = h*sum; MPI_Reduce(MPI_SUM) of
 * doubles to rank 0, which prints
 * "pi is approximately %.16f, error is %.16f". */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static double f(double x)
{
    return 4.0 / (1.0 + x * x);
}

int main(int argc, char **argv)
{
    const double PI25DT = 3.141592653589793238462643;
    int rank, size;
    int64_t n = 1000000;
    double h, sum = 0.0, mypi, pi = 0.0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0 && argc > 1) {
        char *end;
        long long v = strtoll(argv[1], &end, 10);
        if (*end != '\0' || end == argv[1] || v <= 0) {
            fprintf(stderr, "pi: bad interval count %s\n", argv[1]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        n = (int64_t)v;
    }
    MPI_Bcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);

    h = 1.0 / (double)n;
    for (int64_t i = rank + 1; i <= n; i += size)
        sum += f(h * ((double)i - 0.5));
    mypi = h * sum;
    MPI_Reduce(&mypi, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("pi is approximately %.16f, error is %.16f\n", pi, fabs(pi - PI25DT));
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
