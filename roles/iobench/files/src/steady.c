/* --steady-state: run the workload in rounds until the SNIA PTS steady-state rule holds, and
 * `iobench precondition`: sequential writes over the whole working set, N passes.
 *
 * Rounds: every round is a complete run (run_bench) of --ss-round-time seconds with a fresh
 * random stream; sequential modes continue where the previous round stopped; the page cache is
 * not dropped between rounds; --warmup runs once, before round 1. After round k >= window, the
 * tracked metric of rounds k-window+1..k is judged (ss_eval): steady when
 *   max - min <= range_pct % of the window average, and
 *   the least-squares line's excursion over the window |slope| x (window - 1) <= slope_pct %
 *   of the window average.
 * The run stops at the first round that satisfies the rule, after --ss-max-rounds, on a signal
 * or on I/O errors. The reported run (ops, histograms, threads, intervals, window epochs,
 * devstat) is the last `window` rounds merged (ss_merge). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "summary.h"

int ss_eval(const double *y, int n, double range_pct, double slope_pct, ss_eval_t *ev)
{
    memset(ev, 0, sizeof *ev);
    if (n < 2) return 0;
    double sum = 0, mn = y[0], mx = y[0];
    for (int i = 0; i < n; i++) {
        sum += y[i];
        if (y[i] < mn) mn = y[i];
        if (y[i] > mx) mx = y[i];
    }
    double avg = sum / n, xm = (n - 1) / 2.0, sxy = 0, sxx = 0;
    for (int i = 0; i < n; i++) {
        sxy += (i - xm) * (y[i] - avg);
        sxx += (i - xm) * (i - xm);
    }
    double slope = sxy / sxx;
    ev->avg = avg;
    ev->range = mx - mn;
    ev->range_limit = range_pct / 100.0 * fabs(avg);
    ev->slope = slope;
    ev->slope_excursion = fabs(slope) * (n - 1);
    ev->slope_limit = slope_pct / 100.0 * fabs(avg);
    ev->range_ok = ev->range <= ev->range_limit;
    ev->slope_ok = ev->slope_excursion <= ev->slope_limit;
    return ev->range_ok && ev->slope_ok;
}

static void round_stats(const bench_t *b, ss_round_t *r)
{
    double el = 0;
    merged_t *m = rw_merged(b, &el);
    if (!m) return;
    r->iops = el > 0 ? (double)m->n / el : 0;
    r->mib_per_sec = el > 0 ? (double)m->bytes / 1048576.0 / el : 0;
    r->lat_p99_us = op_percentile(m, 99) / 1e3;
    r->start_epoch = b->epoch_at_measure_start;
    r->end_epoch = r->start_epoch + el;
    free(m);
}

static double metric_of(const options_t *o, const ss_round_t *r)
{
    return o->ss_metric == SS_MIB ? r->mib_per_sec : o->ss_metric == SS_P99 ? r->lat_p99_us : r->iops;
}

static uint64_t errors_of(const bench_t *b)
{
    uint64_t e = 0;
    for (int i = 0; i < b->nth; i++) e += b->th[i].err_total;
    return e;
}

/* opstat of the same thread over two rounds (variance terms re-centred on d's shift) */
static void opstat_merge(opstat_t *d, const opstat_t *s)
{
    if (!s->n) return;
    if (!d->n) { *d = *s; return; }
    double dk = (double)s->k - (double)d->k;
    d->s2 += s->s2 + 2 * dk * s->s1 + (double)s->n * dk * dk;
    d->s1 += s->s1 + (double)s->n * dk;
    d->n += s->n;
    d->bytes += s->bytes;
    d->sum += s->sum;
    if (s->min < d->min) d->min = s->min;
    if (s->max > d->max) d->max = s->max;
    for (uint32_t i = 0; i < HIST_N; i++) d->hist[i] += s->hist[i];
}

/* one bench holding rounds r[0..n-1] (consecutive) as if it had been one run */
static bench_t *ss_merge(bench_t **r, int n, const options_t *o)
{
    bench_t *m = calloc(1, sizeof *m);
    options_t *mo = malloc(sizeof *mo);
    if (!m || !mo) { free(m); free(mo); return NULL; }
    const bench_t *first = r[0], *last = r[n - 1];
    *mo = *first->o;
    mo->warmup_s = o->warmup_s > 0 && first->o->warmup_s > 0 ? o->warmup_s : 0;
    m->o = mo;
    m->nth = first->nth;
    m->blocks_per_file = first->blocks_per_file;
    m->total_blocks = first->total_blocks;
    m->t_start = first->t_start;
    m->measure_start = first->measure_start;
    m->epoch_at_measure_start = first->epoch_at_measure_start;
    m->epoch_at_start = first->epoch_at_start;
    m->late_start = first->late_start;
    m->t_end = last->t_end;
    m->ival_ns = first->ival_ns;
    if (posix_memalign((void **)&m->th, 128, (size_t)m->nth * sizeof *m->th) != 0) { free(m); free(mo); return NULL; }
    memset(m->th, 0, (size_t)m->nth * sizeof *m->th);
    /* intervals: round j's slots start at j x slots-per-round (--ss-round-time is a multiple of
     * --report-interval); a completion just after a round's deadline goes to its last slot */
    uint64_t per = m->ival_ns ? (uint64_t)llround(o->ss_round_time_s * 1e9 / (double)m->ival_ns) : 0;
    if (per == 0 && m->ival_ns) per = 1;
    for (int i = 0; i < m->nth; i++) {
        thread_t *t = &m->th[i];
        t->id = i;
        t->b = m;
        t->role = first->th[i].role;
        if (per) {
            t->iv_cap = per * (uint64_t)n;
            t->iv = calloc(t->iv_cap, sizeof *t->iv);
            if (!t->iv) t->iv_cap = 0;
        }
        for (int j = 0; j < n; j++) {
            const thread_t *s = &r[j]->th[i];
            for (int k = 0; k < OP_KINDS; k++) opstat_merge(&t->st[k], &s->st[k]);
            opstat_merge(&t->cst, &s->cst);
            t->busy_ns += s->busy_ns;
            t->measured += s->measured;
            t->err_total += s->err_total;
            for (int k = 0; k < ERR_KINDS; k++) t->errs[k] += s->errs[k];
            if (s->err_total && (!t->first_err[0] || s->first_err_t < t->first_err_t)) {
                t->first_err_t = s->first_err_t;
                t->first_err_kind = s->first_err_kind;
                memcpy(t->first_err, s->first_err, sizeof t->first_err);
            }
            t->offsets_hash ^= s->offsets_hash;
            uint64_t used = s->iv_used < s->iv_cap ? s->iv_used : s->iv_cap;
            for (uint64_t q = 0; t->iv && q < used; q++) {
                uint64_t dst = (uint64_t)j * per + (q < per ? q : per - 1);
                ival_t *d = &t->iv[dst];
                const ival_t *v = &s->iv[q];
                for (int k = 0; k < OP_KINDS; k++) {
                    d->ops[k] += v->ops[k];
                    d->bytes[k] += v->bytes[k];
                    d->lat_sum[k] += v->lat_sum[k];
                    if (v->lat_max[k] > d->lat_max[k]) d->lat_max[k] = v->lat_max[k];
                    for (uint32_t h = 0; h < IVAL_N; h++) d->hist[k][h] += v->hist[k][h];
                }
                if (dst + 1 > t->iv_used) t->iv_used = dst + 1;
            }
        }
    }
    if (first->ds && last->ds && (m->ds = calloc(1, sizeof *m->ds))) {
        *m->ds = *first->ds;
        for (int i = 0; i < m->ds->n; i++) {
            devstat_dev_t *d = &m->ds->d[i];
            const devstat_dev_t *e = &last->ds->d[i];
            d->ok = d->ok && e->ok && d->source == e->source;
            if (e->nfields < d->nfields) d->nfields = e->nfields;
            memcpy(d->end, e->end, sizeof d->end);
        }
        if (!m->ds->err[0] && last->ds->err[0]) memcpy(m->ds->err, last->ds->err, sizeof m->ds->err);
    }
    return m;
}

int run_steady(options_t *o, int *fds, ss_res_t *sr)
{
    memset(sr, 0, sizeof *sr);
    sr->round = -1;
    const int w = o->ss_window;
    bench_t **win = calloc((size_t)w, sizeof *win);   /* the last w rounds, oldest first */
    uint64_t *pos = NULL;
    if (!win) return EXIT_INTERNAL;
    int have = 0, rc = 0;
    double anchor_epoch = 0;
    uint64_t anchor_ns = 0;
    double *y = calloc((size_t)w, sizeof *y);
    if (!y) { free(win); return EXIT_INTERNAL; }
    for (int k = 0; k < o->ss_max_rounds; k++) {
        options_t *so = malloc(sizeof *so);
        bench_t *b = calloc(1, sizeof *b);
        if (!so || !b) { free(so); free(b); rc = EXIT_INTERNAL; break; }
        *so = *o;
        so->time_s = o->ss_round_time_s;
        so->warmup_s = k == 0 ? o->warmup_s : 0;
        so->stream_base = (uint64_t)k << 20;
        b->o = so;
        b->fds = fds;
        b->seq_resume = pos;
        rc = run_bench(b);
        if (rc || b->setup_failed) {
            if (!rc) { err_msg("%s", b->setup_err); rc = EXIT_ENV; }
            bench_free_owned(b);
            break;
        }
        /* one timeline for every round: each round's epoch from the first round's anchor and
         * the monotonic clock, as the merged window's (two clock reads per round drift apart
         * by tens of microseconds on a loaded host) */
        if (k == 0) {
            anchor_epoch = b->epoch_at_measure_start;
            anchor_ns = atomic_load(&b->measure_start);
        } else {
            b->epoch_at_measure_start = anchor_epoch + (double)(atomic_load(&b->measure_start) - anchor_ns) / 1e9;
        }
        free(b->arena);              /* I/O buffers are not needed any more; keep the statistics */
        b->arena = NULL;
        if (!pos) pos = calloc((size_t)b->nth, sizeof *pos);
        for (int i = 0; pos && i < b->nth; i++) pos[i] = b->th[i].seq_pos;
        b->seq_resume = NULL;
        ss_round_t *r = &sr->rounds[sr->nrounds++];
        r->round = k + 1;
        round_stats(b, r);
        if (have == w) { bench_free_owned(win[0]); memmove(win, win + 1, (size_t)(w - 1) * sizeof *win); have--; }
        win[have++] = b;
        if (atomic_load(&g_stop)) { sr->stopped = "interrupted"; break; }
        if (errors_of(b)) { sr->stopped = "io_error"; break; }
        if (have == w) {
            for (int i = 0; i < w; i++) y[i] = metric_of(o, &sr->rounds[sr->nrounds - w + i]);
            sr->evaluated = 1;
            if (ss_eval(y, w, o->ss_range_pct, o->ss_slope_pct, &sr->ev)) {
                sr->reached = 1;
                sr->round = k + 1;
                sr->stopped = "steady";
                break;
            }
        }
    }
    if (!rc && !sr->stopped) sr->stopped = "max_rounds";
    if (!rc && have) {
        sr->window_first = sr->nrounds - have + 1;
        sr->bench = have == 1 ? NULL : ss_merge(win, have, o);
        if (have == 1) { sr->bench = win[0]; win[0] = NULL; }
        if (!sr->bench) rc = EXIT_INTERNAL;
    }
    for (int i = 0; i < have; i++) bench_free_owned(win[i]);
    free(win);
    free(y);
    free(pos);
    return rc;
}

/* iobench precondition: --passes sequential write passes over the whole working set */
int run_precondition(options_t *o, int *fds, precond_res_t *pr)
{
    memset(pr, 0, sizeof *pr);
    uint64_t bpf = o->file_size / o->block_size;
    uint64_t blocks = bpf * o->file_num;
    for (int p = 0; p < o->passes && p < PRECOND_MAX_PASSES; p++) {
        options_t so = *o;
        so.mode = MODE_SEQWR;
        so.time_s = 0;
        so.requests = blocks;
        so.warmup_s = 0;
        so.fsync_freq = 0;
        so.fsync_all = 0;
        so.fsync_end = 1;             /* a pass ends on the device */
        so.report_interval_s = 0;
        so.stream_base = (uint64_t)p << 20;
        bench_t *b = calloc(1, sizeof *b);
        if (!b) return EXIT_INTERNAL;
        b->o = &so;
        b->fds = fds;
        int rc = run_bench(b);
        if (rc || b->setup_failed) {
            if (!rc) { err_msg("%s", b->setup_err); rc = EXIT_ENV; }
            bench_free(b);
            return rc;
        }
        double el = (double)(b->t_end - b->t_start) / 1e9;
        uint64_t bytes = 0, errs = 0;
        for (int i = 0; i < b->nth; i++) { bytes += b->th[i].st[OP_WRITE].bytes; errs += b->th[i].err_total; }
        pr->pass_mib_per_sec[pr->passes++] = el > 0 ? (double)bytes / 1048576.0 / el : 0;
        pr->bytes += bytes;
        pr->elapsed_s += el;
        if (errs) {
            for (int i = 0; i < b->nth; i++)
                if (b->th[i].err_total) { snprintf(pr->first_err, sizeof pr->first_err, "%s", b->th[i].first_err); break; }
            pr->errors += errs;
        }
        bench_free(b);
        if (errs || atomic_load(&g_stop)) break;
    }
    pr->mib_per_sec = pr->elapsed_s > 0 ? (double)pr->bytes / 1048576.0 / pr->elapsed_s : 0;
    return 0;
}
