/* The SNIA PTS steady-state rule (ss_eval) on recorded round series. */
#include <math.h>
#include <string.h>
#include "../iobench.h"

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

int main(void)
{
    ss_eval_t e;
    /* reached: small noise around 1000 */
    double flat[] = {1000, 1030, 990, 1010, 1005};
    CHECK(ss_eval(flat, 5, 20, 10, &e) == 1 && e.range_ok && e.slope_ok, "flat series must be steady");
    CHECK(fabs(e.avg - 1007) < 1e-9 && fabs(e.range - 40) < 1e-9 && fabs(e.range_limit - 201.4) < 1e-9,
          "avg %g range %g limit %g", e.avg, e.range, e.range_limit);
    /* not reached: a fresh SSD falling off its burst (both limits broken) */
    double burst[] = {9000, 7000, 5000, 3500, 3000};
    CHECK(ss_eval(burst, 5, 20, 10, &e) == 0 && !e.range_ok && !e.slope_ok, "burst must not be steady");
    /* slope only: a steady climb of 4 % a round stays inside the 20 % range, but the fit moves
     * 16 % of the average over the window (> 10 %) */
    double climb[] = {100, 104, 108, 112, 116};
    CHECK(ss_eval(climb, 5, 20, 10, &e) == 0 && e.range_ok && !e.slope_ok,
          "climb: range_ok %d slope_ok %d", e.range_ok, e.slope_ok);
    CHECK(fabs(e.slope - 4) < 1e-9 && fabs(e.slope_excursion - 16) < 1e-9 && fabs(e.slope_limit - 10.8) < 1e-9,
          "slope %g excursion %g limit %g", e.slope, e.slope_excursion, e.slope_limit);
    /* range only: alternating rounds, no trend (slope 0), range 25 > 22 */
    double zigzag[] = {100, 125, 100, 125, 100};
    CHECK(ss_eval(zigzag, 5, 20, 10, &e) == 0 && !e.range_ok && e.slope_ok && fabs(e.slope) < 1e-9,
          "zigzag: range_ok %d slope_ok %d slope %g", e.range_ok, e.slope_ok, e.slope);
    /* the limits are inclusive: range exactly 20 % of the average */
    double edge[] = {90, 110, 100, 110, 90};
    CHECK(ss_eval(edge, 5, 20, 10, &e) == 1, "range == limit is steady (range %g limit %g)", e.range, e.range_limit);
    /* a latency series (lower is better) is judged the same way */
    double lat[] = {250.0, 251.5, 249.0, 250.5, 250.0};
    CHECK(ss_eval(lat, 5, 20, 10, &e) == 1, "latency series");
    /* window of 2 works; 1 cannot be judged */
    double two[] = {100, 101};
    CHECK(ss_eval(two, 2, 20, 10, &e) == 1, "window 2");
    CHECK(ss_eval(two, 1, 20, 10, &e) == 0, "window 1 is never steady");
    if (fails) { fprintf(stderr, "ss_test: %d failures\n", fails); return 1; }
    printf("ss_test: ok\n");
    return 0;
}
