/* rng: repeatable per seed/stream, streams differ, bounded values unbiased and in range. */
#include <math.h>
#include <string.h>
#include "../iobench.h"

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

int main(void)
{
    uint64_t a[4], b[4], c[4], d[4];
    rng_seed(a, 42, 0); rng_seed(b, 42, 0); rng_seed(c, 43, 0); rng_seed(d, 42, 1);
    int same_ab = 1, same_ac = 1, same_ad = 1;
    for (int i = 0; i < 100; i++) {
        uint64_t x = rng_next(a), y = rng_next(b), z = rng_next(c), w = rng_next(d);
        same_ab &= x == y; same_ac &= x == z; same_ad &= x == w;
    }
    CHECK(same_ab, "same seed must repeat");
    CHECK(!same_ac, "different seed must differ");
    CHECK(!same_ad, "different thread stream must differ");
    /* chi-square on a non power-of-two range */
    enum { K = 12 };
    uint64_t cnt[K] = {0};
    const int N = 1200000;
    for (int i = 0; i < N; i++) {
        uint64_t v = rng_bounded(a, K);
        CHECK(v < K, "out of range");
        cnt[v]++;
    }
    double chi = 0, e = (double)N / K;
    for (int i = 0; i < K; i++) chi += ((double)cnt[i] - e) * ((double)cnt[i] - e) / e;
    CHECK(chi < 40, "chi-square %.1f too large (11 dof)", chi);
    /* a range where modulo bias would be visible: n = 3 * 2^62 */
    uint64_t n = 3ull << 62, lowhalf = 0;
    for (int i = 0; i < 300000; i++) if (rng_bounded(a, n) < n / 2) lowhalf++;
    CHECK(fabs((double)lowhalf / 300000 - 0.5) < 0.01, "bias %.4f", (double)lowhalf / 300000);
    CHECK(rng_bounded(a, 1) == 0, "n=1");
    unsigned char buf[37];
    memset(buf, 0, sizeof buf);
    rng_fill(a, buf, sizeof buf);
    int zeros = 0;
    for (size_t i = 0; i < sizeof buf; i++) zeros += buf[i] == 0;
    CHECK(zeros < 5, "fill looks empty");
    if (fails) return 1;
    printf("rng_test: ok (chi2 %.2f)\n", chi);
    return 0;
}
