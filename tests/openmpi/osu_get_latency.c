/* osu_get_latency.c: MPI_Get latency, OSU method (osu_rma.h). */
#define RMA_OP 1
#define RMA_TITLE "osu_get_latency"
#include "osu_rma.h"
