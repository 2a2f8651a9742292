/* The power-cut test's witness (docs/durability.md, docs/iobench.md "Witness").
 *
 * `iobench run --verify --witness FILE` records every write the target acknowledged as
 * durable (O_DSYNC / O_SYNC returned, or the fsync after it did) in FILE, a file the run
 * creates in shared memory (a tmpfs such as /dev/shm): a 4096-byte header (one line of JSON,
 * NUL padded) and one 16-byte entry per block of --block-size:
 *
 *   0 u32 generation acknowledged last (0 = none)   4 u32 ms after the header's epoch_ms
 *   8 u32 sequence number of that write             12 u32 CRC-32C of bytes 0-11 and the block
 *
 * Each write also carries its sequence number in every 4 KiB it writes (bytes 32-39, after
 * the verify header, under its CRC). Another process may copy FILE at any moment (the
 * controller takes its copy before it cuts the power): an entry copied in the middle of its
 * update fails its CRC and is counted as unreadable, never read as a generation that was not
 * acknowledged. What the copy holds was acknowledged before the copy was taken.
 *
 * `iobench witness-check --witness COPY (--dir DIR | --device DEV)` reads back every block
 * the copy says was acknowledged and classifies it: intact (every 4 KiB of it holds this run's
 * data of that generation or a later one), lost (every 4 KiB holds older data: an earlier
 * generation, another run's, or no verify header at all, as zeros never written), torn (its
 * 4 KiB pieces disagree, or one carries a header whose CRC fails: half old, half new) or
 * misplaced (the data of another place). A write still in flight at the cut may leave a later generation or, on a
 * drive whose atomic write unit is smaller than the block, a torn block; the test writes
 * blocks of the drive's atomic unit, and the report says which blocks had a write acknowledged
 * within its last second. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "iobench.h"

#define WITNESS_HDR 4096u
#define WITNESS_FORMAT "iobench-witness"
#define WITNESS_SAMPLES 16

typedef struct wentry { uint32_t gen, ack_ms, seq, check; } wentry_t;
_Static_assert(sizeof(wentry_t) == 16, "a witness entry is 16 bytes");

witness_t g_wit;

static inline uint32_t entry_check(uint64_t blk, uint32_t gen, uint32_t ack_ms, uint32_t seq)
{
    uint32_t v[3] = {gen, ack_ms, seq};
    return crc32c((uint32_t)(blk * 0x9e3779b97f4a7c15ull >> 32), v, sizeof v);
}

static uint64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int witness_open(const options_t *o, uint64_t blocks, uint64_t bpf)
{
    memset(&g_wit, 0, sizeof g_wit);
    size_t len = WITNESS_HDR + (size_t)blocks * sizeof(wentry_t);
    int fd = open(o->witness, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        err_msg("--witness %s: cannot create it%s: %s", o->witness,
                errno == EEXIST ? " (it exists: the witness is always a new file)" : "", strerror(errno));
        return EXIT_ENV;
    }
    if (ftruncate(fd, (off_t)len) != 0) {
        err_msg("--witness %s: cannot size it to %zu bytes: %s", o->witness, len, strerror(errno));
        close(fd);
        unlink(o->witness);
        return EXIT_ENV;
    }
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        err_msg("--witness %s: cannot map it: %s", o->witness, strerror(errno));
        unlink(o->witness);
        return EXIT_ENV;
    }
    g_wit.epoch_ms = realtime_ms();
    char *h = m;
    FILE *f = fmemopen(h, WITNESS_HDR - 1, "w");
    if (!f) { munmap(m, len); unlink(o->witness); return EXIT_INTERNAL; }
    fprintf(f, "{\"format\": \"" WITNESS_FORMAT "\", \"version\": 1, \"run_id\": \"%016" PRIx64 "\", "
            "\"block_size\": %" PRIu64 ", \"blocks\": %" PRIu64 ", \"blocks_per_file\": %" PRIu64 ", "
            "\"files\": %" PRIu64 ", \"target\": \"%s\", \"path\": ", g_vf.run_id, o->block_size, blocks, bpf,
            o->file_num, o->device ? "device" : "dir");
    json_str(f, o->device ? o->device : o->dir);
    fprintf(f, ", \"epoch_ms\": %" PRIu64 "}\n", g_wit.epoch_ms);
    int bad = ferror(f);
    long used = ftell(f);
    fclose(f);
    if (bad || used <= 0 || used >= (long)WITNESS_HDR - 1) {
        err_msg("--witness %s: the header does not fit in %u bytes (a path that long?)", o->witness, WITNESS_HDR);
        munmap(m, len);
        unlink(o->witness);
        return EXIT_USAGE;
    }
    memset(h + used, 0, WITNESS_HDR - (size_t)used);
    g_wit.map = m;
    g_wit.len = len;
    g_wit.ent = (void *)(h + WITNESS_HDR);
    g_wit.blocks = blocks;
    return 0;
}

void witness_close(void)
{
    if (g_wit.map) munmap(g_wit.map, g_wit.len);
    memset(&g_wit, 0, sizeof g_wit);
}

void witness_stamp(unsigned char *buf, uint64_t len, uint32_t seq)
{
    uint64_t s = seq;
    for (uint64_t p = 0; p + VERIFY_CHUNK <= len; p += VERIFY_CHUNK) memcpy(buf + p + VERIFY_HDR, &s, 8);
}

void witness_ack(uint64_t blk, uint32_t gen, uint32_t seq)
{
    if (blk >= g_wit.blocks) return;
    uint64_t now = realtime_ms();
    uint32_t ms = now > g_wit.epoch_ms ? (uint32_t)(now - g_wit.epoch_ms) : 0;
    /* two 8-byte stores: a copy taken between them fails the entry's CRC */
    uint64_t lo = (uint64_t)gen | (uint64_t)ms << 32;
    uint64_t hi = (uint64_t)seq | (uint64_t)entry_check(blk, gen, ms, seq) << 32;
    uint64_t *e = (uint64_t *)&g_wit.ent[blk];
    __atomic_store_n(&e[1], 0, __ATOMIC_RELAXED);       /* invalid until both halves are new */
    __atomic_store_n(&e[0], lo, __ATOMIC_RELEASE);
    __atomic_store_n(&e[1], hi, __ATOMIC_RELEASE);
}

/* ---- witness-check ---- */

typedef struct wsample {
    const char *kind;
    uint64_t blk;
    uint32_t gen, seq, found_gen, found_seq;
    uint64_t ack_ms, found_run;
    int found_valid;
} wsample_t;

/* the value of "key": in the header's JSON line (our own format): a number or a string */
static int hdr_u64(const char *h, const char *key, uint64_t *v)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(h, pat);
    if (!p) return -1;
    p += strlen(pat);
    if (*p == '"') p++;
    char *end;
    errno = 0;
    *v = strtoull(p, &end, strcmp(key, "run_id") ? 10 : 16);
    return errno || end == p ? -1 : 0;
}

static int hdr_str(const char *h, const char *key, char *out, size_t n)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(h, pat);
    if (!p) return -1;
    p += strlen(pat);
    size_t i = 0;
    for (; *p && *p != '"' && i + 1 < n; p++) {
        if (*p == '\\' && p[1]) p++;
        out[i++] = *p;
    }
    out[i] = 0;
    return *p == '"' ? 0 : -1;
}

static void usage_check(void) __attribute__((noreturn));
static void usage_check(void)
{
    die_usage("usage: iobench witness-check --witness FILE (--dir DIR | --device DEV) [--output FILE]");
}

static void sample_json(FILE *f, const wsample_t *s, uint64_t epoch, uint64_t bpf, uint64_t bs, int dev)
{
    fprintf(f, "{\"kind\": \"%s\", \"block\": %" PRIu64 ", ", s->kind, s->blk);
    if (dev) fprintf(f, "\"offset\": %" PRIu64 ", ", s->blk * bs + g_io_base);
    else fprintf(f, "\"file\": %" PRIu64 ", \"offset\": %" PRIu64 ", ", s->blk / bpf, s->blk % bpf * bs);
    fprintf(f, "\"acked_gen\": %" PRIu32 ", \"acked_seq\": %" PRIu32 ", \"acked_at_ms\": %" PRIu64 ", ",
            s->gen, s->seq, epoch + s->ack_ms);
    if (s->found_valid)
        fprintf(f, "\"found_gen\": %" PRIu32 ", \"found_seq\": %" PRIu32 ", \"found_run_id\": \"%016" PRIx64 "\"}",
                s->found_gen, s->found_seq, s->found_run);
    else
        fprintf(f, "\"found_gen\": null, \"found_seq\": null, \"found_run_id\": null}");
}

int witness_check_command(int argc, char **argv)
{
    const char *wpath = NULL, *dir = NULL, *device = NULL, *output = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = !strcmp(a, "--witness") ? &wpath : !strcmp(a, "--dir") ? &dir
                         : !strcmp(a, "--device") ? &device : !strcmp(a, "--output") ? &output : NULL;
        if (!dst) die_usage("witness-check: unknown option '%s' (use --witness, --dir, --device, --output)", a);
        if (i + 1 >= argc || !*argv[i + 1]) die_usage("witness-check: %s needs a value", a);
        *dst = argv[++i];
    }
    if (!wpath || (!dir) == (!device)) usage_check();
    crc32c_init();

    int wfd = open(wpath, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (wfd < 0 || fstat(wfd, &st) != 0) {
        err_msg("--witness %s: %s", wpath, strerror(errno));
        if (wfd >= 0) close(wfd);
        return EXIT_ENV;
    }
    char hdr[WITNESS_HDR + 1] = {0};
    ssize_t hn = pread(wfd, hdr, WITNESS_HDR, 0);
    uint64_t run_id = 0, bs = 0, blocks = 0, bpf = 0, files = 0, epoch = 0;
    char fmt[32] = "", kind[16] = "";
    if (hn != (ssize_t)WITNESS_HDR || hdr_str(hdr, "format", fmt, sizeof fmt) || strcmp(fmt, WITNESS_FORMAT) ||
        hdr_u64(hdr, "run_id", &run_id) || hdr_u64(hdr, "block_size", &bs) || hdr_u64(hdr, "blocks", &blocks) ||
        hdr_u64(hdr, "blocks_per_file", &bpf) || hdr_u64(hdr, "files", &files) || hdr_u64(hdr, "epoch_ms", &epoch) ||
        hdr_str(hdr, "target", kind, sizeof kind) || !bs || bs % VERIFY_CHUNK || !bpf || !files ||
        blocks != bpf * files || (uint64_t)st.st_size != WITNESS_HDR + blocks * sizeof(wentry_t)) {
        err_msg("--witness %s: not an iobench witness (header or size wrong)", wpath);
        close(wfd);
        return EXIT_USAGE;
    }
    if (strcmp(kind, device ? "device" : "dir") != 0) {
        err_msg("--witness %s was written on a %s target; give --%s", wpath, kind, strcmp(kind, "dir") ? "device" : "dir");
        close(wfd);
        return EXIT_USAGE;
    }
    wentry_t *ent = malloc(blocks * sizeof *ent);
    if (!ent) { close(wfd); return EXIT_INTERNAL; }
    ssize_t en = pread(wfd, ent, blocks * sizeof *ent, WITNESS_HDR);
    close(wfd);
    if (en != (ssize_t)(blocks * sizeof *ent)) { free(ent); err_msg("--witness %s: short read", wpath); return EXIT_ENV; }

    int *fds = calloc(files, sizeof *fds);
    if (!fds) { free(ent); return EXIT_INTERNAL; }
    for (uint64_t fi = 0; fi < files; fi++) {
        char path[4200];
        if (device) snprintf(path, sizeof path, "%s", device);
        else snprintf(path, sizeof path, "%s/" FILE_PREFIX "%" PRIu64, dir, fi);
        fds[fi] = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fds[fi] < 0) {
            err_msg("witness-check: cannot open %s for direct reads: %s", path, strerror(errno));
            for (uint64_t j = 0; j < fi; j++) close(fds[j]);
            free(fds);
            free(ent);
            return EXIT_ENV;
        }
    }
    unsigned char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, bs) != 0) { free(fds); free(ent); return EXIT_INTERNAL; }

    uint64_t acked = 0, unreadable = 0, intact = 0, lost = 0, torn = 0, misplaced = 0, read_errors = 0;
    uint64_t last_ack = 0, lost_first = UINT64_MAX, lost_last = 0;
    wsample_t samples[WITNESS_SAMPLES];
    int ns = 0;
    for (uint64_t blk = 0; blk < blocks; blk++) {
        const wentry_t *e = &ent[blk];
        if (!e->gen && !e->ack_ms && !e->seq && !e->check) continue;        /* never acknowledged */
        if (e->check != entry_check(blk, e->gen, e->ack_ms, e->seq) || !e->gen) { unreadable++; continue; }
        acked++;
        if (e->ack_ms > last_ack) last_ack = e->ack_ms;
        uint64_t fi = blk / bpf, off = blk % bpf * bs;
        ssize_t r;
        do r = pread(fds[fi], buf, bs, (off_t)(off + g_io_base)); while (r < 0 && errno == EINTR);
        if (r != (ssize_t)bs) {
            read_errors++;
            if (ns < WITNESS_SAMPLES) samples[ns++] = (wsample_t){"read_error", blk, e->gen, e->seq, 0, 0, e->ack_ms, 0, 0};
            continue;
        }
        int newer = 0, older = 0, bad = 0, wrong = 0;
        uint32_t fgen = 0, fseq = 0;
        uint64_t frun = 0;
        int fvalid = 0;
        for (uint64_t p = 0; p + VERIFY_CHUNK <= bs; p += VERIFY_CHUNK) {
            const unsigned char *c = buf + p;
            uint32_t magic, stored, tgt, gen;
            uint64_t hoff, hrun, seq;
            memcpy(&magic, c, 4);
            memcpy(&tgt, c + 4, 4);
            memcpy(&hoff, c + 8, 8);
            memcpy(&hrun, c + 16, 8);
            memcpy(&gen, c + 24, 4);
            memcpy(&stored, c + 28, 4);
            memcpy(&seq, c + 32, 8);
            /* no header at all: what the drive held before this data (zeros, another
             * program's bytes) is older data; a header whose CRC fails is a 4 KiB half
             * written (half old, half new) */
            if (magic != VERIFY_MAGIC) { older++; continue; }
            if (stored != verify_chunk_crc(c)) { bad++; continue; }
            if (hoff != off + p || tgt != (device ? 0 : (uint32_t)fi)) { wrong++; continue; }
            if (!fvalid) { fvalid = 1; fgen = gen; fseq = (uint32_t)seq; frun = hrun; }
            if (hrun == run_id && gen >= e->gen) newer++;
            else older++;
        }
        const char *k = NULL;
        if (wrong) { misplaced++; k = "misplaced"; }
        else if (bad || (older && newer)) { torn++; k = "torn"; }
        else if (older) { lost++; k = "lost"; }
        else intact++;
        if (k && strcmp(k, "misplaced")) {
            uint64_t at = epoch + e->ack_ms;
            if (at < lost_first) lost_first = at;
            if (at > lost_last) lost_last = at;
        }
        if (k && ns < WITNESS_SAMPLES) samples[ns++] = (wsample_t){k, blk, e->gen, e->seq, fgen, fseq, e->ack_ms, frun, fvalid};
    }
    for (uint64_t fi = 0; fi < files; fi++) close(fds[fi]);
    free(fds);
    free(ent);
    free(buf);

    FILE *f = stdout;
    if (output) {
        f = fopen(output, "w");
        if (!f) { err_msg("--output %s: %s", output, strerror(errno)); return EXIT_ENV; }
    }
    fprintf(f, "{\"iobench_version\": \"" IOBENCH_VERSION "\", \"command\": \"witness-check\", \"witness\": "
            "{\"run_id\": \"%016" PRIx64 "\", \"block_size\": %" PRIu64 ", \"blocks\": %" PRIu64 ", "
            "\"epoch_ms\": %" PRIu64 ", \"last_ack_ms\": %s", run_id, bs, blocks, epoch, acked ? "" : "null");
    if (acked) fprintf(f, "%" PRIu64, epoch + last_ack);
    fprintf(f, "}, \"target\": ");
    json_str(f, device ? device : dir);
    fprintf(f, ", \"acked\": %" PRIu64 ", \"intact\": %" PRIu64 ", \"lost\": %" PRIu64 ", \"torn\": %" PRIu64
            ", \"misplaced\": %" PRIu64 ", \"read_errors\": %" PRIu64 ", \"unreadable_entries\": %" PRIu64 ", "
            "\"lost_acked_ms\": ", acked, intact, lost, torn, misplaced, read_errors, unreadable);
    if (lost_last) fprintf(f, "{\"first\": %" PRIu64 ", \"last\": %" PRIu64 "}", lost_first, lost_last);
    else fprintf(f, "null");
    fprintf(f, ", \"samples\": [");
    for (int i = 0; i < ns; i++) {
        if (i) fprintf(f, ", ");
        sample_json(f, &samples[i], epoch, bpf, bs, device != NULL);
    }
    fprintf(f, "]}\n");
    if (output ? fclose(f) != 0 : fflush(f) != 0) return EXIT_INTERNAL;
    return lost || torn || misplaced || read_errors ? EXIT_IOERR : EXIT_OK;
}
