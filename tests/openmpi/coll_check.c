/* coll_check.c: every MPI collective on deterministic inputs, results
 * printed by rank 0 in a fixed order (gorun's own code).
 *
 * The Go twin is the "coll-check" rank case in tests/coll_test.go; the test
 * runs both at the same np and compares the outputs line by line: integer
 * tokens exactly, floating-point tokens (those with a '.', 'e', "inf" or
 * "nan") within a relative 1e-12 (see README.md: the two runtimes may
 * associate a floating-point reduction differently).
 *
 * Output: lines "NAME rank R: TOKENS" for every rank R (gathered to rank 0),
 * then a line "done". Counts are small (K=7) so that whole results print,
 * and large ones (KL=3001) are printed as digests: for integers the sum of
 * (i+1)*v[i] modulo 2^61-1, for doubles the sums of v[i] and of (i%7)*v[i].
 *
 * Inputs: ival(r, i) = ((r+1)*(i+3)*7 + i/5) % 13 - 6 (int32),
 *         dval(r, i) = 1/(r+i+1) + 0.1*r (double),
 *         pairs (dval(r,i) rounded to 1/4 in [0,2), index r*100+i) for
 *         MINLOC/MAXLOC, affine maps (ival+7, (ival^2+3) mod P) for the
 *         non-commutative user operation. */
#define _POSIX_C_SOURCE 200809L
#include <complex.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 7
#define KL 3001
#define P 65521.0

static int rank, size;
static char *out;      /* this rank's lines */
static size_t outlen, outcap;

static void emit(const char *fmt, ...)
{
    va_list ap;
    char line[65536];
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (outlen + (size_t)n + 1 > outcap) {
        outcap = 2 * (outlen + (size_t)n + 1);
        out = realloc(out, outcap);
    }
    memcpy(out + outlen, line, (size_t)n);
    outlen += (size_t)n;
    out[outlen] = '\0';
}

static int ival(int r, int i) { return ((r + 1) * (i + 3) * 7 + i / 5) % 13 - 6; }
static double dval(int r, int i) { return 1.0 / (r + i + 1) + 0.1 * r; }

struct di {
    double v;
    int i;
};

static void ints(const char *name, const int *v, int n)
{
    emit("%s rank %d:", name, rank);
    if (n <= K) {
        for (int i = 0; i < n; i++)
            emit(" %d", v[i]);
    } else {
        unsigned long long h = 0, m = (1ULL << 61) - 1;
        for (int i = 0; i < n; i++)
            h = (h + (unsigned long long)(i + 1) * (unsigned long long)(long long)v[i]) % m;
        emit(" n=%d h=%llu", n, h);
    }
    emit("\n");
}

static void dbls(const char *name, const double *v, int n)
{
    emit("%s rank %d:", name, rank);
    if (n <= K) {
        for (int i = 0; i < n; i++)
            emit(" %.17g", v[i]);
    } else {
        double s = 0, t = 0;
        for (int i = 0; i < n; i++) {
            s += v[i];
            t += (i % 7) * v[i];
        }
        emit(" n=%d s=%.17g t=%.17g", n, s, t);
    }
    emit("\n");
}

static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    double *a = in, *b = inout;
    (void)dt;
    for (int i = 0; i < *len; i++) {
        double a1 = a[2 * i], b1 = a[2 * i + 1], a2 = b[2 * i], b2 = b[2 * i + 1];
        b[2 * i] = fmod(a1 * a2, P);
        b[2 * i + 1] = fmod(a2 * b1 + b2, P);
    }
}

static void run(int n)
{
    int *si = malloc(sizeof(int) * (size_t)n * (size_t)size);
    int *ri = malloc(sizeof(int) * (size_t)n * (size_t)size);
    double *sd = malloc(sizeof(double) * (size_t)n * (size_t)size);
    double *rd = malloc(sizeof(double) * (size_t)n * (size_t)size);
    struct di *sp = malloc(sizeof(struct di) * (size_t)n), *rp = malloc(sizeof(struct di) * (size_t)n);
    double *sa = malloc(2 * sizeof(double) * (size_t)n), *ra = malloc(2 * sizeof(double) * (size_t)n);
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    int *rcounts = malloc(sizeof(int) * (size_t)size), *rdispls = malloc(sizeof(int) * (size_t)size);
    char name[64];
    MPI_Op affine;
    MPI_Op_create(affine_fn, 0, &affine);
    for (int i = 0; i < n * size; i++) {
        si[i] = ival(rank, i);
        sd[i] = dval(rank, i);
    }
    for (int i = 0; i < n; i++) {
        sp[i].v = floor(fmod(dval(rank, i) * 4, 8)) / 4;
        sp[i].i = rank * 100 + i;
        sa[2 * i] = ival(rank, i) + 7;
        sa[2 * i + 1] = fmod((double)(ival(rank, i) * ival(rank, i) + 3), P);
    }

    memcpy(ri, si, sizeof(int) * (size_t)n);
    MPI_Bcast(ri, n, MPI_INT, size / 2, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "bcast/%d", n);
    ints(name, ri, n);

    static const struct {
        const char *name;
        MPI_Op op;
    } iops[] = {{"sum", MPI_SUM}, {"prod", MPI_PROD}, {"min", MPI_MIN}, {"max", MPI_MAX},
                {"land", MPI_LAND}, {"lor", MPI_LOR}, {"lxor", MPI_LXOR}, {"band", MPI_BAND},
                {"bor", MPI_BOR}, {"bxor", MPI_BXOR}};
    for (size_t o = 0; o < sizeof iops / sizeof iops[0]; o++) {
        MPI_Allreduce(si, ri, n, MPI_INT, iops[o].op, MPI_COMM_WORLD);
        snprintf(name, sizeof name, "allreduce/%s/%d", iops[o].name, n);
        ints(name, ri, n);
    }
    static const struct {
        const char *name;
        MPI_Op op;
    } dops[] = {{"sum", MPI_SUM}, {"prod", MPI_PROD}, {"min", MPI_MIN}, {"max", MPI_MAX}};
    for (size_t o = 0; o < sizeof dops / sizeof dops[0]; o++) {
        MPI_Allreduce(sd, rd, n, MPI_DOUBLE, dops[o].op, MPI_COMM_WORLD);
        snprintf(name, sizeof name, "allreduce/double-%s/%d", dops[o].name, n);
        dbls(name, rd, n);
    }
    memcpy(rd, sd, sizeof(double) * (size_t)n);
    MPI_Allreduce(MPI_IN_PLACE, rd, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "allreduce/inplace/%d", n);
    dbls(name, rd, n);

    MPI_Allreduce(sp, rp, n, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
    emit("allreduce/minloc/%d rank %d:", n, rank);
    for (int i = 0; i < n && i < K; i++)
        emit(" %.17g@%d", rp[i].v, rp[i].i);
    emit("\n");
    MPI_Allreduce(sp, rp, n, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    emit("allreduce/maxloc/%d rank %d:", n, rank);
    for (int i = 0; i < n && i < K; i++)
        emit(" %.17g@%d", rp[i].v, rp[i].i);
    emit("\n");

    MPI_Allreduce(sa, ra, n, MPI_C_DOUBLE_COMPLEX, affine, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "allreduce/affine/%d", n);
    dbls(name, ra, 2 * n);
    MPI_Scan(sa, ra, n, MPI_C_DOUBLE_COMPLEX, affine, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "scan/affine/%d", n);
    dbls(name, ra, 2 * n);

    for (int root = 0; root < size; root += size > 2 ? size - 1 : 1) {
        memset(ri, 0, sizeof(int) * (size_t)n);
        MPI_Reduce(si, ri, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
        snprintf(name, sizeof name, "reduce/root%d/%d", root, n);
        if (rank == root)
            ints(name, ri, n);
        MPI_Reduce(sd, rd, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
        snprintf(name, sizeof name, "reduce/double/root%d/%d", root, n);
        if (rank == root)
            dbls(name, rd, n);
    }

    MPI_Gather(si, n, MPI_INT, ri, n, MPI_INT, size - 1, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "gather/%d", n);
    if (rank == size - 1)
        ints(name, ri, n * size);
    MPI_Scatter(si, n, MPI_INT, ri, n, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "scatter/%d", n);
    ints(name, ri, n);
    MPI_Allgather(si, n, MPI_INT, ri, n, MPI_INT, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "allgather/%d", n);
    ints(name, ri, n * size);
    MPI_Alltoall(si, n, MPI_INT, ri, n, MPI_INT, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "alltoall/%d", n);
    ints(name, ri, n * size);

    /* v forms: rank r's block holds n - r%3 elements, packed. */
    int total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = n - r % 3 > 0 ? n - r % 3 : 0;
        displs[r] = total;
        total += counts[r];
    }
    MPI_Gatherv(si, counts[rank], MPI_INT, ri, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "gatherv/%d", n);
    if (rank == 0)
        ints(name, ri, total);
    MPI_Scatterv(si, counts, displs, MPI_INT, ri, counts[rank], MPI_INT, size - 1, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "scatterv/%d", n);
    ints(name, ri, counts[rank]);
    MPI_Allgatherv(si, counts[rank], MPI_INT, ri, counts, displs, MPI_INT, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "allgatherv/%d", n);
    ints(name, ri, total);
    /* Alltoallv: rank s sends rank d (s+d)%3 + n/2 elements. */
    int st = 0, rt = 0;
    for (int d = 0; d < size; d++) {
        counts[d] = (rank + d) % 3 + n / 2;
        displs[d] = st;
        st += counts[d];
        rcounts[d] = (d + rank) % 3 + n / 2;
        rdispls[d] = rt;
        rt += rcounts[d];
    }
    MPI_Alltoallv(si, counts, displs, MPI_INT, ri, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "alltoallv/%d", n);
    ints(name, ri, rt);

    MPI_Reduce_scatter_block(si, ri, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "reduce_scatter_block/%d", n);
    ints(name, ri, n);
    MPI_Reduce_scatter_block(sd, rd, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "reduce_scatter_block/double/%d", n);
    dbls(name, rd, n);
    for (int r = 0; r < size; r++)
        rcounts[r] = n - r % 2;
    MPI_Reduce_scatter(si, ri, rcounts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "reduce_scatter/%d", n);
    ints(name, ri, rcounts[rank]);

    MPI_Scan(si, ri, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "scan/%d", n);
    ints(name, ri, n);
    MPI_Scan(sd, rd, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "scan/double/%d", n);
    dbls(name, rd, n);
    MPI_Exscan(si, ri, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "exscan/%d", n);
    if (rank > 0)
        ints(name, ri, n);

    MPI_Op_free(&affine);
    free(si), free(ri), free(sd), free(rd), free(sp), free(rp), free(sa), free(ra);
    free(counts), free(displs), free(rcounts), free(rdispls);
}

static void comms(void)
{
    MPI_Comm split, cart, row;
    int srank, ssize, sum, dims[2] = {0, 0}, periods[2] = {1, 0}, coords[2], src, dst;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split);
    MPI_Comm_rank(split, &srank);
    MPI_Comm_size(split, &ssize);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, split);
    emit("split rank %d: %d %d %d\n", rank, srank, ssize, sum);
    MPI_Comm_free(&split);

    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    MPI_Cart_coords(cart, rank, 2, coords);
    emit("cart rank %d: dims %d %d coords %d %d", rank, dims[0], dims[1], coords[0], coords[1]);
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    emit(" shift0 %d %d", src == MPI_PROC_NULL ? -1 : src, dst == MPI_PROC_NULL ? -1 : dst);
    MPI_Cart_shift(cart, 1, 1, &src, &dst);
    emit(" shift1 %d %d\n", src == MPI_PROC_NULL ? -1 : src, dst == MPI_PROC_NULL ? -1 : dst);
    int remain[2] = {0, 1};
    MPI_Cart_sub(cart, remain, &row);
    MPI_Comm_rank(row, &srank);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, row);
    emit("cartsub rank %d: %d %d\n", rank, srank, sum);
    MPI_Comm_free(&row);
    MPI_Comm_free(&cart);
    if (rank == 0) {
        static const int cases[][2] = {{1, 2}, {6, 2}, {7, 2}, {12, 2}, {12, 3}, {16, 2}, {24, 2}, {30, 3}, {36, 2}, {64, 3}, {120, 4}};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int d[4] = {0, 0, 0, 0};
            MPI_Dims_create(cases[c][0], cases[c][1], d);
            emit("dims rank 0: %d %d ->", cases[c][0], cases[c][1]);
            for (int i = 0; i < cases[c][1]; i++)
                emit(" %d", d[i]);
            emit("\n");
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    run(K);
    run(KL);
    comms();
    /* Rank 0 prints every rank's lines, in rank order. */
    int len = (int)outlen, *lens = NULL, *offs = NULL, total = 0;
    char *all = NULL;
    if (rank == 0) {
        lens = malloc(sizeof(int) * (size_t)size);
        offs = malloc(sizeof(int) * (size_t)size);
    }
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            offs[r] = total;
            total += lens[r];
        }
        all = malloc((size_t)total + 1);
    }
    MPI_Gatherv(out, len, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        fwrite(all, 1, (size_t)total, stdout);
        printf("done\n");
    }
    free(out), free(all), free(lens), free(offs);
    MPI_Finalize();
    return 0;
}
