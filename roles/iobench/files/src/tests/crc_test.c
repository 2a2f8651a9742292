/* CRC-32C: the standard check value, the hardware and table implementations agree on random
 * buffers of every alignment and length, incremental sums equal one-shot sums, and a verify
 * header stamped then checked is clean while one flipped bit, another offset or an older
 * generation are told apart (corrupt, misplaced, stale). */
#include <stdlib.h>
#include <string.h>
#include "../iobench.h"

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

int main(void)
{
    crc32c_init();
    const char *name = NULL;
    crc32c_fn hw = crc32c_hw_impl(&name);
    CHECK(crc32c_sw(0, "123456789", 9) == 0xE3069283u, "table: check value 0x%08x", crc32c_sw(0, "123456789", 9));
    CHECK(crc32c(0, "123456789", 9) == 0xE3069283u, "chosen (%s): check value", crc32c_impl_name());
    CHECK(crc32c_sw(0, "", 0) == 0, "empty");
    if (hw) CHECK(hw(0, "123456789", 9) == 0xE3069283u, "%s: check value 0x%08x", name, hw(0, "123456789", 9));
    else fprintf(stderr, "crc_test: no hardware CRC-32C on this CPU/build; table only\n");

    uint64_t rs[4];
    rng_seed(rs, 7, 0);
    enum { MAX = 9000 };
    unsigned char *buf = malloc(MAX + 16);
    int compared = 0;
    for (int i = 0; i < 3000; i++) {
        size_t len = (size_t)rng_bounded(rs, MAX), al = (size_t)rng_bounded(rs, 16);
        rng_fill(rs, buf, MAX + 16);
        uint32_t seed = (uint32_t)rng_next(rs);
        uint32_t a = crc32c_sw(seed, buf + al, len);
        if (hw) { CHECK(hw(seed, buf + al, len) == a, "len %zu align %zu: hw != table", len, al); compared++; }
        size_t cut = len ? (size_t)rng_bounded(rs, len) : 0;
        CHECK(crc32c_sw(crc32c_sw(seed, buf + al, cut), buf + al + cut, len - cut) == a, "incremental (table)");
        CHECK(crc32c(crc32c(seed, buf + al, cut), buf + al + cut, len - cut) == a, "incremental (chosen)");
    }
    free(buf);

    /* the verify header: clean, one flipped bit, another place, an older generation */
    options_t o;
    memset(&o, 0, sizeof o);
    o.block_size = 16384;
    o.file_size = 1 << 20;
    o.file_num = 2;
    o.verify = 1;
    o.command = CMD_RUN;
    o.mode = MODE_RNDRW;
    o.threads = 1;
    o.verify_map_max = 1 << 20;
    o.device = "/dev/null";            /* no marker to read */
    CHECK(verify_setup(&o, 1) == 0 && o.verify_on && g_vf.tracked, "setup");
    unsigned char *blk = NULL;
    CHECK(posix_memalign((void **)&blk, 4096, 16384) == 0, "alloc");
    rng_fill(rs, blk, 16384);
    vctx_t *vc = calloc(1, sizeof *vc);
    verify_stamp(blk, 16384, 1, 32768, 0);
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 1, 32768, blk, 16384) == VK_OK, "clean block");
    blk[4096 + 200] ^= 0x10;
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 1, 32768, blk, 16384) == VK_CORRUPT, "flipped bit");
    CHECK(vc->s[vc->ns - 1].off == 32768 + 4096, "corrupt chunk offset %llu", (unsigned long long)vc->s[vc->ns - 1].off);
    blk[4096 + 200] ^= 0x10;
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 1, 49152, blk, 16384) == VK_MISPLACED, "other offset");
    CHECK(vc->s[vc->ns - 1].found_off == 49152 - 16384 || vc->s[vc->ns - 1].found_off == 32768, "found offset");
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 0, 32768, blk, 16384) == VK_MISPLACED, "other file");
    uint64_t b = 1 * (o.file_size / o.block_size) + 32768 / 16384;
    g_vf.map[b] = 3;                   /* this process acknowledged generation 3 */
    verify_stamp(blk, 16384, 1, 32768, 2);
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 1, 32768, blk, 16384) == VK_STALE, "older generation");
    verify_stamp(blk, 16384, 1, 32768, 3);
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 1, 32768, blk, 16384) == VK_OK, "acknowledged generation");
    g_vf.map[b] = 3 | 0x80000000u;     /* the write of generation 3 failed: what the drive holds is unknown */
    verify_stamp(blk, 16384, 1, 32768, 1);
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 1, 32768, blk, 16384) == VK_OK, "failed write: old data accepted");
    CHECK(verify_next_gen(NULL, g_vf.map, b) == 4, "the next write carries a generation above the failed one");
    verify_written(g_vf.map, b, 4, 1);
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 1, 32768, blk, 16384) == VK_STALE, "acknowledged again: stale found");
    g_vf.map[b] = 5 | 0x80000000u;
    blk[100] ^= 1;
    CHECK(verify_check(vc, VOP_READ, &o, g_vf.map, 1, 32768, blk, 16384) == VK_CORRUPT, "corrupt even after a failed write");
    free(vc);
    free(blk);
    free(g_vf.map);
    if (fails) { fprintf(stderr, "crc_test: %d failures\n", fails); return 1; }
    printf("crc_test: ok (%s, %d buffers compared with the table)\n", crc32c_impl_name(), compared);
    return 0;
}
