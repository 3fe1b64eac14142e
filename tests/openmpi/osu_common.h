/* osu_common.h: option parsing, buffers and output shared by gorun's own
 * OSU-method reference benchmarks (the project's code, not OSU's).
 *
 * Flags, identical for the Go programs under examples/osu/:
 *   -m MAX | -m MIN:MAX | -m MIN:   message sizes in bytes (sizes double
 *                                   from MIN: MIN, 2*MIN, ...; 0 is followed by 1)
 *   -i N                            timed iterations, for every size
 *   -x N                            warm-up iterations, for every size
 *   -h                              help
 * Without -i/-x each benchmark uses its own small/large defaults; "large"
 * means size > 8192 bytes.
 *
 * Output: '#' comment lines, then one line per size:
 *   printf("%-10d%18.2f\n", size, value)
 */
#ifndef GORUN_OSU_COMMON_H
#define GORUN_OSU_COMMON_H

#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OSU_LARGE 8192

struct osu_opts {
    long min, max;          /* message sizes, bytes */
    long iters, skip;       /* small-message defaults */
    long iters_l, skip_l;   /* large-message (> OSU_LARGE) defaults */
    int no_sizes;           /* barrier: -m is accepted and ignored */
};

static inline int osu_parse_long(const char *s, long *out)
{
    char *end;
    long v;
    if (s == NULL || *s == '\0')
        return -1;
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* osu_parse_sizes accepts "MAX", "MIN:MAX" and "MIN:". */
static inline int osu_parse_sizes(const char *s, struct osu_opts *o)
{
    const char *colon = strchr(s, ':');
    char buf[64];
    if (colon == NULL)
        return osu_parse_long(s, &o->max);
    if ((size_t)(colon - s) >= sizeof buf)
        return -1;
    memcpy(buf, s, (size_t)(colon - s));
    buf[colon - s] = '\0';
    if (osu_parse_long(buf, &o->min) != 0)
        return -1;
    if (colon[1] == '\0')
        return 0;
    return osu_parse_long(colon + 1, &o->max);
}

static inline void osu_usage(const char *prog, int rank)
{
    if (rank == 0)
        fprintf(stderr,
                "usage: %s [-m MAX | -m MIN:MAX] [-i ITERATIONS] [-x WARMUP]\n"
                "  -m  message sizes in bytes (doubling from MIN)\n"
                "  -i  timed iterations for every size\n"
                "  -x  warm-up iterations for every size\n",
                prog);
}

/* osu_init calls MPI_Init and parses the flags. On -h or a bad flag it
 * finalizes MPI and exits (0 for -h, 1 otherwise). */
static inline void osu_init(int *argc, char ***argv, struct osu_opts *o, int *rank, int *size)
{
    int bad = 0, help = 0;
    char **av;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    av = *argv;
    for (int i = 1; i < *argc && !bad; i++) {
        const char *a = av[i];
        const char *val = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help = 1;
            continue;
        }
        if (a[0] != '-' || a[1] == '\0' || strchr("mix", a[1]) == NULL) {
            bad = 1;
            break;
        }
        if (a[2] != '\0')
            val = a + 2;            /* -m1024 */
        else if (i + 1 < *argc)
            val = av[++i];          /* -m 1024 */
        else {
            bad = 1;
            break;
        }
        switch (a[1]) {
        case 'm':
            bad = osu_parse_sizes(val, o) != 0;
            break;
        case 'i':
            bad = osu_parse_long(val, &o->iters) != 0 || o->iters == 0;
            o->iters_l = o->iters;
            break;
        case 'x':
            bad = osu_parse_long(val, &o->skip) != 0;
            o->skip_l = o->skip;
            break;
        }
    }
    if (!bad && !o->no_sizes && o->min > o->max)
        bad = 1;
    if (bad || help) {
        osu_usage(av[0], *rank);
        MPI_Finalize();
        exit(bad ? 1 : 0);
    }
}

static inline long osu_next_size(long s)
{
    return s == 0 ? 1 : s * 2;
}

static inline long osu_iters(const struct osu_opts *o, long size)
{
    return size > OSU_LARGE ? o->iters_l : o->iters;
}

static inline long osu_skip(const struct osu_opts *o, long size)
{
    return size > OSU_LARGE ? o->skip_l : o->skip;
}

/* osu_alloc returns a page-aligned, touched buffer of n bytes (at least 1). */
static inline char *osu_alloc(size_t n, int fill)
{
    void *p = NULL;
    if (n == 0)
        n = 1;
    if (posix_memalign(&p, 4096, n) != 0) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, fill, n);
    return p;
}

static inline void osu_header(int rank, const char *title, const char *columns)
{
    if (rank == 0) {
        printf("# gorun-ref OSU MPI %s\n", title);
        printf("%s\n", columns);
        fflush(stdout);
    }
}

static inline void osu_line(long size, double value)
{
    printf("%-10d%18.2f\n", (int)size, value);
    fflush(stdout);
}

#define OSU_COL_LAT "# Size          Latency (us)"
#define OSU_COL_BW "# Size      Bandwidth (MB/s)"
#define OSU_COL_COLL "# Size       Avg Latency(us)"

/* osu_need2 ends the job when fewer than two ranks run a point-to-point test. */
static inline void osu_need2(const char *prog, int rank, int size)
{
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "%s: needs at least 2 processes\n", prog);
        MPI_Finalize();
        exit(1);
    }
}

/* osu_coll_run is the loop of every collective benchmark except barrier:
 * for each size, a barrier, then iters+skip calls of op, each timed alone
 * and followed by an untimed barrier; the per-rank figure is the average
 * time per timed call (us), and rank 0 prints the maximum over ranks. */
static inline void osu_coll_run(const struct osu_opts *o, int rank,
                                void (*op)(long size, void *ctx), void *ctx)
{
    for (long size = o->min; size <= o->max; size = osu_next_size(size)) {
        long iters = osu_iters(o, size), skip = osu_skip(o, size);
        double timer = 0.0, avg, max = 0.0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + skip; i++) {
            double t0 = MPI_Wtime();
            op(size, ctx);
            double t1 = MPI_Wtime();
            if (i >= skip)
                timer += t1 - t0;
            MPI_Barrier(MPI_COMM_WORLD);
        }
        avg = timer * 1e6 / (double)iters;
        MPI_Reduce(&avg, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            osu_line(size, max);
    }
}

static inline void osu_coll_defaults(struct osu_opts *o, long min, long max)
{
    o->min = min;
    o->max = max;
    o->iters = 1000;
    o->skip = 200;
    o->iters_l = 100;
    o->skip_l = 10;
}

#endif
