/* osu_fop_latency.c: MPI_Fetch_and_op latency, OSU method (osu_rma.h). */
#define RMA_OP 3
#define RMA_TITLE "osu_fop_latency"
#include "osu_rma.h"
