/* osu_acc_latency.c: MPI_Accumulate latency, OSU method (osu_rma.h). */
#define RMA_OP 2
#define RMA_TITLE "osu_acc_latency"
#include "osu_rma.h"
