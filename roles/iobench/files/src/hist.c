/* Log-linear latency histogram (fio style): values below 2^bits are exact, above that
 * each power of two is split into 2^bits equal buckets. The representative value of a
 * bucket is its midpoint, so the relative error is at most 1/2^(bits+1) (0.78 % for
 * bits = 6). plugins/plugin_utils/common/histogram.py implements the same index scheme. */
#include <math.h>
#include <string.h>
#include "iobench.h"

void hist_range_bits(uint32_t idx, int bits, uint64_t *lo, uint64_t *hi)
{
    const uint64_t B = 1ull << bits;
    if (idx < B) { *lo = idx; *hi = (uint64_t)idx + 1; return; }
    int shift = (int)(idx >> bits) - 1;
    uint64_t sub = idx & (B - 1);
    *lo = (B + sub) << shift;
    *hi = (B + sub + 1) << shift;
}

double hist_value_bits(uint32_t idx, int bits)
{
    uint64_t lo, hi;
    hist_range_bits(idx, bits, &lo, &hi);
    /* integer values in [lo, hi-1]: midpoint */
    return (double)lo + (double)(hi - lo - 1) / 2.0;
}

static uint64_t rank_for(uint64_t total, double p)
{
    double r = ceil(p / 100.0 * (double)total - 1e-9);
    if (r < 1) r = 1;
    if (r > (double)total) r = (double)total;
    return (uint64_t)r;
}

static uint64_t count64(const void *h, uint32_t i) { return ((const uint64_t *)h)[i]; }
static uint64_t count32(const void *h, uint32_t i) { return ((const uint32_t *)h)[i]; }

/* The value of the bucket holding the rank-th smallest sample; used at report time only,
 * for both the run histograms (64-bit counts) and the interval ones (32-bit counts). */
static double percentile_walk(const void *h, uint64_t (*count)(const void *, uint32_t),
                              uint32_t n, int bits, uint64_t total, double p)
{
    if (total == 0) return 0;
    uint64_t rank = rank_for(total, p), cum = 0;
    for (uint32_t i = 0; i < n; i++) {
        cum += count(h, i);
        if (cum >= rank) return hist_value_bits(i, bits);
    }
    return hist_value_bits(n - 1, bits);
}

double hist_percentile_bits(const uint64_t *h, uint32_t n, int bits, uint64_t total, double p)
{
    return percentile_walk(h, count64, n, bits, total, p);
}

double hist_percentile32(const uint32_t *h, uint32_t n, int bits, uint64_t total, double p)
{
    return percentile_walk(h, count32, n, bits, total, p);
}

void merged_add(merged_t *m, const opstat_t *s)
{
    if (s->n == 0) return;
    double n_b = (double)s->n;
    double mean_b = (double)s->k + s->s1 / n_b;
    double m2_b = s->s2 - s->s1 * s->s1 / n_b;
    if (m2_b < 0) m2_b = 0;
    if (m->n == 0) {
        m->min = s->min; m->max = s->max;
        m->mean = mean_b; m->m2 = m2_b;
    } else {
        double n_a = (double)m->n;
        double delta = mean_b - m->mean;
        double nt = n_a + n_b;
        m->mean += delta * n_b / nt;
        m->m2 += m2_b + delta * delta * n_a * n_b / nt;
        if (s->min < m->min) m->min = s->min;
        if (s->max > m->max) m->max = s->max;
    }
    m->n += s->n;
    m->bytes += s->bytes;
    m->sum += s->sum;
    for (uint32_t i = 0; i < HIST_N; i++) m->hist[i] += s->hist[i];
}

double merged_stddev(const merged_t *m)
{
    if (m->n < 2) return 0;
    return sqrt(m->m2 / (double)m->n);
}
