/* xoshiro256** seeded through splitmix64 (per thread: seed and thread number). */
#include <string.h>
#include "iobench.h"

uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rng_seed(uint64_t s[4], uint64_t seed, uint64_t stream)
{
    uint64_t x = seed;
    uint64_t h = splitmix64(&x);
    x = h ^ (stream * 0xd1b54a32d192ed03ull) ^ 0x6a09e667f3bcc909ull;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
    if (!(s[0] | s[1] | s[2] | s[3])) s[0] = 1;
}

void rng_fill(uint64_t *s, void *buf, size_t len)
{
    unsigned char *p = buf;
    while (len >= 8) {
        uint64_t v = rng_next(s);
        memcpy(p, &v, 8);
        p += 8; len -= 8;
    }
    if (len) {
        uint64_t v = rng_next(s);
        memcpy(p, &v, len);
    }
}
