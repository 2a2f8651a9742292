/* Size parsing: plain bytes, or K/M/G/T and KiB/MiB/GiB/TiB suffixes (binary units). */
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include "iobench.h"

int parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s) return -1;
    const char *p = s;
    uint64_t v = 0;
    if (!isdigit((unsigned char)*p)) return -1;
    while (isdigit((unsigned char)*p)) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
        p++;
    }
    int shift = 0;
    if (*p) {
        static const struct { const char *suf; int shift; } tab[] = {
            {"B", 0},  {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20},
            {"G", 30}, {"GiB", 30}, {"T", 40}, {"TiB", 40},
        };
        int found = 0;
        for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
            if (strcasecmp(p, tab[i].suf) == 0) { shift = tab[i].shift; found = 1; break; }
        }
        if (!found) return -1;
    }
    if (shift && v > (UINT64_MAX >> shift)) return -1;
    *out = v << shift;
    return 0;
}

void format_size(uint64_t v, char *buf, size_t n)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    double d = (double)v;
    while (d >= 1024.0 && i < 4) { d /= 1024.0; i++; }
    if (i == 0) snprintf(buf, n, "%llu B", (unsigned long long)v);
    else snprintf(buf, n, "%.2f %s", d, u[i]);
}
