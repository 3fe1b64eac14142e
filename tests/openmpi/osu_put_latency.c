/* osu_put_latency.c: MPI_Put latency, OSU method (osu_rma.h). */
#define RMA_OP 0
#define RMA_TITLE "osu_put_latency"
#include "osu_rma.h"
