#ifndef IOBENCH_SUMMARY_H
#define IOBENCH_SUMMARY_H
#include "iobench.h"

typedef struct ival_sum {
    uint64_t ops[OP_KINDS], bytes[OP_KINDS], lat_sum[OP_KINDS], lat_max[OP_KINDS];
    uint32_t hist[OP_KINDS][IVAL_N];
} ival_sum_t;

typedef struct summary {
    merged_t op[OP_KINDS];
    merged_t commit;             /* ops.commit (commit_measured) */
    double elapsed_s;
    double start_epoch, end_epoch;
    uint64_t events;             /* read+write+fsync */
    double ev_avg, ev_std, ev_min, ev_max, time_avg, time_std;
    uint64_t n_ival;
    ival_sum_t *iv;
    uint64_t errs[ERR_KINDS];
    uint64_t err_total;
    const char *first_err;
    int first_err_kind;
} summary_t;

void summarize(bench_t *b, summary_t *s);
void summary_free(summary_t *s);
/* percentile of merged latencies in ns, clamped to the exact min/max */
double op_percentile(const merged_t *m, double p);
/* Every thread's read and write latencies merged, with the seconds since the measured
 * window opened: the figures of one search step or one steady-state round. NULL when out
 * of memory; the caller frees it. */
merged_t *rw_merged(const bench_t *b, double *elapsed_s);
/* Free a run that owns its copy of the options (a search step, a steady-state round). */
void bench_free_owned(bench_t *b);
#endif
