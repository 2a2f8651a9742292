/* Sum the per-thread statistics once, after all threads have been joined. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "summary.h"

double op_percentile(const merged_t *m, double p)
{
    if (!m->n) return 0;
    double v = hist_percentile_bits(m->hist, HIST_N, HIST_BITS, m->n, p);
    if (v < (double)m->min) v = (double)m->min;
    if (v > (double)m->max) v = (double)m->max;
    return v;
}

void summarize(bench_t *b, summary_t *s)
{
    int n = b->nth ? b->nth : b->o->threads;
    memset(s, 0, sizeof *s);
    for (int i = 0; i < n; i++)
    {
        for (int k = 0; k < OP_KINDS; k++) merged_add(&s->op[k], &b->th[i].st[k]);
        merged_add(&s->commit, &b->th[i].cst);
    }
    uint64_t end = b->t_end > b->measure_start ? b->t_end : b->measure_start;
    s->elapsed_s = (double)(end - b->measure_start) / 1e9;
    s->start_epoch = b->epoch_at_measure_start;
    s->end_epoch = s->start_epoch + s->elapsed_s;
    double sum = 0, sq = 0, tsum = 0, tsq = 0;
    s->ev_min = INFINITY;
    s->ev_max = 0;
    for (int i = 0; i < n; i++) {
        thread_t *t = &b->th[i];
        double ev = (double)(t->st[0].n + t->st[1].n + t->st[2].n);
        double ts = (double)t->busy_ns / 1e9;
        sum += ev; sq += ev * ev; tsum += ts; tsq += ts * ts;
        if (ev < s->ev_min) s->ev_min = ev;
        if (ev > s->ev_max) s->ev_max = ev;
        s->events += (uint64_t)ev;
        if (t->iv_used > s->n_ival) s->n_ival = t->iv_used;
        for (int k = 0; k < ERR_KINDS; k++) s->errs[k] += t->errs[k];
        s->err_total += t->err_total;
    }
    /* earliest first error */
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        thread_t *t = &b->th[i];
        if (t->err_total && t->first_err_t < best) {
            best = t->first_err_t;
            s->first_err = t->first_err;
            s->first_err_kind = t->first_err_kind;
        }
    }
    s->ev_avg = sum / n;
    s->ev_std = sqrt(fmax(0, sq / n - s->ev_avg * s->ev_avg));
    s->time_avg = tsum / n;
    s->time_std = sqrt(fmax(0, tsq / n - s->time_avg * s->time_avg));
    if (n == 0 || s->ev_min == INFINITY) s->ev_min = 0;
    if (s->n_ival) {
        s->iv = calloc(s->n_ival, sizeof *s->iv);
        if (!s->iv) { s->n_ival = 0; return; }
        for (int i = 0; i < n; i++) {
            thread_t *t = &b->th[i];
            uint64_t m = t->iv_used < t->iv_cap ? t->iv_used : t->iv_cap;
            for (uint64_t j = 0; j < m; j++) {
                ival_t *v = &t->iv[j];
                ival_sum_t *d = &s->iv[j];
                for (int k = 0; k < OP_KINDS; k++) {
                    if (!v->ops[k]) continue;
                    d->ops[k] += v->ops[k];
                    d->bytes[k] += v->bytes[k];
                    d->lat_sum[k] += v->lat_sum[k];
                    if (v->lat_max[k] > d->lat_max[k]) d->lat_max[k] = v->lat_max[k];
                    for (uint32_t h = 0; h < IVAL_N; h++) d->hist[k][h] += v->hist[k][h];
                }
            }
        }
    }
}

void summary_free(summary_t *s)
{
    free(s->iv);
}

merged_t *rw_merged(const bench_t *b, double *elapsed_s)
{
    merged_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    for (int i = 0; i < b->nth; i++) {
        merged_add(m, &b->th[i].st[OP_READ]);
        merged_add(m, &b->th[i].st[OP_WRITE]);
    }
    uint64_t end = b->t_end > b->measure_start ? b->t_end : b->measure_start;
    *elapsed_s = (double)(end - b->measure_start) / 1e9;
    return m;
}

void bench_free_owned(bench_t *b)
{
    if (!b) return;
    options_t *so = b->o;
    bench_free(b);
    free(so);
}
