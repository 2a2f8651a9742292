/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of --verify
 * (docs/iobench.md "Data verification"). Three implementations give the same sums
 * (tests/crc_test.c): the SSE4.2 crc32 instruction (chosen at run time when the CPU has it),
 * the ARMv8 CRC32 instructions (when built for them) and a slicing-by-8 table otherwise.
 * crc32c(0, "123456789", 9) == 0xE3069283. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "iobench.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#endif

static uint32_t tab[8][256];
static int tab_ready;

static void tab_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xff];
    tab_ready = 1;
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff]; n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = tab[7][w & 0xff] ^ tab[6][(w >> 8) & 0xff] ^ tab[5][(w >> 16) & 0xff] ^ tab[4][(w >> 24) & 0xff] ^
            tab[3][(w >> 32) & 0xff] ^ tab[2][(w >> 40) & 0xff] ^ tab[1][(w >> 48) & 0xff] ^ tab[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__)
/* Three lanes: the crc32 instruction has a latency of 3 cycles and a throughput of 1, so
 * three independent sums over three adjacent LANE-byte pieces run at once; the first two
 * are then moved past the following pieces by "appending LANE zero bytes" (a linear map
 * over GF(2), applied with 4 table lookups) and xored in. */
#define LANE 256
static uint32_t shift_tab[4][256];     /* the operator "append LANE zero bytes" */

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++) if (vec & 1) sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
    for (int i = 0; i < 32; i++) sq[i] = gf2_times(mat, mat[i]);
}

static void shift_init(void)
{
    uint32_t a[32], b[32];
    a[0] = 0x82F63B78u;                /* one zero bit: the reflected polynomial */
    for (int i = 1; i < 32; i++) a[i] = 1u << (i - 1);
    uint32_t *cur = a, *nxt = b;
    for (unsigned bits = 1; bits < LANE * 8; bits <<= 1) {   /* 2, 4, ... LANE x 8 zero bits */
        gf2_square(nxt, cur);
        uint32_t *t = cur; cur = nxt; nxt = t;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 0; k < 4; k++) shift_tab[k][n] = gf2_times(cur, n << (8 * k));
}

static inline uint32_t shift_lane(uint32_t c)
{
    return shift_tab[0][c & 0xff] ^ shift_tab[1][(c >> 8) & 0xff] ^ shift_tab[2][(c >> 16) & 0xff] ^ shift_tab[3][c >> 24];
}

__attribute__((target("sse4.2")))
static uint32_t crc32c_x86(uint32_t crc, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
    while (n >= 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        for (const unsigned char *end = p + LANE; p < end; p += 8) {
            uint64_t a, b, d;
            memcpy(&a, p, 8); memcpy(&b, p + LANE, 8); memcpy(&d, p + 2 * LANE, 8);
            c = _mm_crc32_u64(c, a);
            c1 = _mm_crc32_u64(c1, b);
            c2 = _mm_crc32_u64(c2, d);
        }
        c = shift_lane((uint32_t)c) ^ (uint32_t)c1;
        c = shift_lane((uint32_t)c) ^ (uint32_t)c2;
        p += 2 * LANE;
        n -= 3 * LANE;
    }
    while (n >= 8) { uint64_t a; memcpy(&a, p, 8); c = _mm_crc32_u64(c, a); p += 8; n -= 8; }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
static uint32_t crc32c_arm(uint32_t crc, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = __crc32cb(c, *p++); n--; }
    while (n >= 8) { uint64_t a; memcpy(&a, p, 8); c = __crc32cd(c, a); p += 8; n -= 8; }
    while (n--) c = __crc32cb(c, *p++);
    return ~c;
}
#endif

/* the hardware implementation of this CPU, or NULL */
crc32c_fn crc32c_hw_impl(const char **name)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        static int ready;
        if (!ready) { shift_init(); ready = 1; }
        if (name) *name = "sse4.2";
        return crc32c_x86;
    }
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
    if (name) *name = "armv8-crc32";
    return crc32c_arm;
#endif
    if (name) *name = NULL;
    return NULL;
}

static crc32c_fn g_crc;
static const char *g_crc_name = "table";

void crc32c_init(void)
{
    if (!tab_ready) tab_init();
    if (g_crc) return;
    const char *n = NULL;
    crc32c_fn f = getenv("IOBENCH_CRC_TABLE") ? NULL : crc32c_hw_impl(&n);
    g_crc = f ? f : crc32c_sw;
    g_crc_name = f ? n : "table";
}

const char *crc32c_impl_name(void) { return g_crc_name; }

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
    return g_crc(crc, buf, n);
}
