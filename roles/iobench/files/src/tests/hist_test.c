/* Histogram accuracy: percentiles from the log-linear histogram against the exact
 * nearest-rank percentiles of the same samples; every one within 1 % relative error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "../iobench.h"

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t exact_pct(const uint64_t *sorted, size_t n, double p)
{
    double r = ceil(p / 100.0 * (double)n - 1e-9);
    if (r < 1) r = 1;
    if (r > (double)n) r = (double)n;
    return sorted[(size_t)r - 1];
}

static void check_dist(const char *name, uint64_t *v, size_t n)
{
    static opstat_t st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) opstat_add(&st, v[i], 4096);
    merged_t m;
    memset(&m, 0, sizeof m);
    merged_add(&m, &st);
    qsort(v, n, sizeof *v, cmp_u64);
    static const double ps[] = {1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100};
    double worst = 0;
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        double h = hist_percentile_bits(m.hist, HIST_N, HIST_BITS, m.n, ps[i]);
        if (h < (double)m.min) h = (double)m.min;
        if (h > (double)m.max) h = (double)m.max;
        uint64_t e = exact_pct(v, n, ps[i]);
        double rel = e ? fabs(h - (double)e) / (double)e : fabs(h);
        if (rel > worst) worst = rel;
        CHECK(rel <= 0.01, "%s p%.2f: hist %.1f exact %llu rel %.4f", name, ps[i], h, (unsigned long long)e, rel);
    }
    /* exact moments */
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)v[i];
    double mean = sum / (double)n, ss = 0;
    for (size_t i = 0; i < n; i++) ss += ((double)v[i] - mean) * ((double)v[i] - mean);
    double sd = sqrt(ss / (double)n);
    CHECK(fabs(m.mean - mean) <= 1e-6 * mean + 1e-9, "%s mean %f vs %f", name, m.mean, mean);
    CHECK(fabs(merged_stddev(&m) - sd) <= 1e-6 * sd + 1e-6, "%s stddev %f vs %f", name, merged_stddev(&m), sd);
    CHECK(m.min == v[0] && m.max == v[n - 1], "%s min/max", name);
    printf("  %-12s n=%zu worst relative percentile error %.4f%%\n", name, n, worst * 100);
}

int main(void)
{
    /* index <-> range consistency over many values */
    for (uint64_t x = 0; x < 5000000; x = x < 1000 ? x + 1 : x + x / 97 + 1) {
        uint32_t i = hist_index(x);
        uint64_t lo, hi;
        hist_range_bits(i, HIST_BITS, &lo, &hi);
        CHECK(lo <= x && x < hi, "value %llu index %u range [%llu,%llu)", (unsigned long long)x, i,
              (unsigned long long)lo, (unsigned long long)hi);
        double mid = hist_value_bits(i, HIST_BITS);
        CHECK(x == 0 || fabs(mid - (double)x) / (double)x <= 1.0 / 128 + 1e-12, "midpoint error at %llu", (unsigned long long)x);
    }
    CHECK(hist_index(UINT64_MAX) == HIST_N - 1, "clamp top %u", hist_index(UINT64_MAX));
    CHECK(hist_index_bits(UINT64_MAX, IVAL_BITS, IVAL_MAX_EXP) == IVAL_N - 1, "ival clamp");
    /* indexes are monotonic */
    uint32_t prev = 0;
    for (uint64_t x = 1; x < (1ull << 40); x = x * 3 / 2 + 1) {
        uint32_t i = hist_index(x);
        CHECK(i >= prev, "monotonic at %llu", (unsigned long long)x);
        prev = i;
    }

    size_t n = 200000;
    uint64_t *v = malloc(n * sizeof *v);
    uint64_t s[4];
    rng_seed(s, 12345, 0);
    /* uniform 1us..10ms */
    for (size_t i = 0; i < n; i++) v[i] = 1000 + rng_bounded(s, 10000000);
    check_dist("uniform", v, n);
    /* log-normal-ish: exp of uniform over 3 decades of ns up to seconds */
    for (size_t i = 0; i < n; i++) {
        double u = (double)(rng_next(s) >> 11) / 9007199254740992.0;
        v[i] = (uint64_t)exp(log(50.0) + u * (log(2e9) - log(50.0)));
    }
    check_dist("log-uniform", v, n);
    /* bimodal: cache hits ~2us and device reads ~200us, with a tail */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_bounded(s, 1000);
        if (r < 700) v[i] = 1500 + rng_bounded(s, 1000);
        else if (r < 995) v[i] = 150000 + rng_bounded(s, 100000);
        else v[i] = 5000000 + rng_bounded(s, 50000000);
    }
    check_dist("bimodal", v, n);
    /* small exact values */
    for (size_t i = 0; i < 1000; i++) v[i] = i % 130;
    check_dist("small", v, 1000);
    /* constant */
    for (size_t i = 0; i < 1000; i++) v[i] = 123456;
    check_dist("constant", v, 1000);
    /* merge of two threads equals one histogram */
    static opstat_t a, b2, all;
    memset(&a, 0, sizeof a); memset(&b2, 0, sizeof b2); memset(&all, 0, sizeof all);
    for (size_t i = 0; i < 10000; i++) {
        uint64_t x = 100 + rng_bounded(s, 1000000);
        opstat_add(i & 1 ? &a : &b2, x, 1);
        opstat_add(&all, x, 1);
    }
    static merged_t m1, m2;
    merged_add(&m1, &a); merged_add(&m1, &b2); merged_add(&m2, &all);
    CHECK(memcmp(m1.hist, m2.hist, sizeof m1.hist) == 0, "merged histogram differs");
    CHECK(fabs(merged_stddev(&m1) - merged_stddev(&m2)) < 1e-6 * merged_stddev(&m2), "merged stddev differs");
    CHECK(fabs(m1.mean - m2.mean) < 1e-9 * m2.mean, "merged mean differs");
    free(v);
    if (fails) { fprintf(stderr, "hist_test: %d failures\n", fails); return 1; }
    printf("hist_test: ok\n");
    return 0;
}
