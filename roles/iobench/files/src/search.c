/* --search threads|iodepth: the latency-bounded maximum.
 *
 * Steps 1, 2, 4, ... up to --search-max (the max itself is the last step when it is not a power
 * of two). Every step is a complete run (run_bench: its threads are created, run
 * --search-step-time seconds and are joined; per-thread statistics as in any run), with a fresh
 * random stream per step and the page cache dropped before it (unless --keep-cache). --warmup
 * runs once, before the first step's window. The search stops when a step's percentile exceeds
 * the bound (bound_exceeded), when the max has run (max_reached), when the IOPS gain over the
 * previous step was below --search-min-gain (5 %) on two consecutive steps (no_gain), on SIGINT/SIGTERM
 * (interrupted) or when a step had I/O errors (io_error). best = the complete step with the
 * highest IOPS whose percentile is within the bound. The reported run (ops, total, threads,
 * intervals, window) is the best step's, else the last step's. */
#include <stdlib.h>
#include <string.h>
#include "summary.h"

static void step_stats(bench_t *b, search_step_t *st, double pct)
{
    merged_t *m = rw_merged(b, &st->elapsed_s);
    if (!m) return;
    st->ops = m->n;
    st->iops = st->elapsed_s > 0 ? (double)m->n / st->elapsed_s : 0;
    st->p99_us = op_percentile(m, 99) / 1e3;
    st->pct_us = op_percentile(m, pct) / 1e3;
    free(m);
}

static uint64_t errors_of(const bench_t *b)
{
    uint64_t e = 0;
    for (int i = 0; i < b->nth; i++) e += b->th[i].err_total;
    return e;
}

int run_search(options_t *o, int *fds, search_res_t *sr)
{
    memset(sr, 0, sizeof *sr);
    sr->best = -1;
    sr->reported = -1;
    bench_t *best_b = NULL, *last_b = NULL;
    int low_gain = 0, v = 1;
    const char *stop = NULL;
    for (int k = 0; !stop && k < SEARCH_MAX_STEPS; k++) {
        options_t *so = malloc(sizeof *so);
        bench_t *b = calloc(1, sizeof *b);
        if (!so || !b) { free(so); free(b); bench_free_owned(best_b); if (last_b != best_b) bench_free_owned(last_b); return EXIT_INTERNAL; }
        *so = *o;
        if (o->search == SEARCH_THREADS) so->threads = v;
        else so->iodepth = v;
        so->warmup_s = k == 0 ? o->warmup_s : 0;
        so->time_s = o->search_step_time_s;
        so->stream_base = (uint64_t)k << 20;     /* fresh offsets per step (threads < 2^20) */
        if (k > 0 && !o->keep_cache) drop_cache(o, fds);
        b->o = so;
        b->fds = fds;
        int rc = run_bench(b);
        if (rc || b->setup_failed) {
            if (!rc) { err_msg("%s", b->setup_err); rc = EXIT_ENV; }
            bench_free_owned(b); bench_free_owned(best_b); if (last_b != best_b) bench_free_owned(last_b);
            return rc;
        }
        int idx = sr->nsteps++;
        search_step_t *st = &sr->steps[idx];
        st->threads = so->threads;
        st->iodepth = so->iodepth;
        step_stats(b, st, o->search_pct);
        int intr = atomic_load(&g_stop) != 0;
        uint64_t errs = errors_of(b);
        st->complete = !intr && !errs;
        int within = st->complete && st->ops > 0 && st->pct_us <= o->search_bound_ms * 1000.0;

        if (last_b && last_b != best_b) bench_free_owned(last_b);
        last_b = b;
        if (within && (sr->best < 0 || st->iops > sr->steps[sr->best].iops)) {
            if (best_b && best_b != last_b) bench_free_owned(best_b);
            best_b = b;
            sr->best = idx;
        }

        if (intr) stop = "interrupted";
        else if (errs) stop = "io_error";
        else if (!within) stop = "bound_exceeded";
        else if (v >= o->search_max) stop = "max_reached";
        else {
            if (idx > 0) {
                double prev = sr->steps[idx - 1].iops;
                double gain = prev > 0 ? st->iops / prev - 1.0 : 1.0;
                low_gain = gain < o->search_min_gain / 100.0 ? low_gain + 1 : 0;
            }
            if (o->search_min_gain > 0 && low_gain >= 2) stop = "no_gain";
        }
        v = v * 2 > o->search_max ? o->search_max : v * 2;
    }
    if (!stop) stop = "max_reached";
    sr->stopped = stop;
    int use_last = best_b == NULL || !strcmp(stop, "io_error");
    if (use_last) {
        if (best_b && best_b != last_b) bench_free_owned(best_b);
        sr->bench = last_b;
        sr->reported = sr->nsteps - 1;
    } else {
        if (last_b != best_b) bench_free_owned(last_b);
        sr->bench = best_b;
        sr->reported = sr->best;
    }
    return 0;
}
