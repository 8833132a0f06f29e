/* ranges.c: the ranges and marks outside the pipeline (analyzer_internal.h, "ranges.c"): what
 * a trace holds besides the pipeline ranges decode.c turns into ops. Skeleton: kept nothing yet
 * (issue 16 fills it in). */
#include "analyzer_internal.h"

void an_other_range(state *st, file_state *f, const thread_state *t, const open_range *o,
                    uint64_t t1)
{
    (void)st, (void)f, (void)t, (void)o, (void)t1;
}

void an_other_mark(state *st, file_state *f, const thread_state *t, const pp_rec_range *r,
                   uint64_t ts)
{
    (void)st, (void)f, (void)t, (void)r, (void)ts;
}
