#include <string.h>
#include "../iobench.h"

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void ok(const char *s, uint64_t want)
{
    uint64_t v = 0;
    int r = parse_size(s, &v);
    CHECK(r == 0 && v == want, "parse_size(%s) = %d, %llu (want %llu)", s, r, (unsigned long long)v, (unsigned long long)want);
}
static void bad(const char *s)
{
    uint64_t v = 0;
    CHECK(parse_size(s, &v) != 0, "parse_size(%s) should fail", s);
}

int main(void)
{
    ok("0", 0); ok("4096", 4096); ok("16K", 16384); ok("16k", 16384); ok("16KiB", 16384);
    ok("1M", 1 << 20); ok("1MiB", 1 << 20); ok("2G", 2ull << 30); ok("2GiB", 2ull << 30);
    ok("1T", 1ull << 40); ok("1TiB", 1ull << 40); ok("512B", 512); ok("16777216", 16777216);
    bad(""); bad("K"); bad("16X"); bad("16KB"); bad("1.5G"); bad("-1"); bad("16 K"); bad("16Kib2");
    bad("99999999999999999999"); bad("16777216T");
    char buf[32];
    format_size(16384, buf, sizeof buf);
    CHECK(!strcmp(buf, "16.00 KiB"), "format %s", buf);
    if (fails) return 1;
    printf("size_test: ok\n");
    return 0;
}
