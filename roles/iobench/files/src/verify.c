/* --verify: end-to-end data verification (docs/iobench.md "Data verification").
 *
 * Every 4 KiB iobench writes (prepare, measured and warmup writes, precondition; files and
 * raw devices) starts with a 32-byte header followed by incompressible random data:
 *
 *   0  u32 magic "IOBV"      4  u32 target (file index; 0 for --device)
 *   8  u64 byte offset of this 4 KiB in its file / device
 *   16 u64 run id (random per process)   24 u32 generation   28 u32 CRC-32C
 *
 * The CRC-32C covers the 4 KiB with its own field left out. Every read checks each 4 KiB of
 * the block: magic or CRC wrong = corrupt; CRC right but the offset or target of another
 * place = misplaced (a misdirected write or read); right place but not the last write this
 * process had acknowledged for the block = stale (a lost write). The last needs the
 * generation map: 4 bytes per block of --block-size, at most --verify-map-max bytes; a block
 * this process has not written yet (0) accepts any generation (prepare of another process,
 * an earlier run). Each block belongs to one thread (workload.c thread_init), and a thread
 * never has two requests on one block in flight (engine_uring.c), so no check can meet a
 * write in progress.
 *
 * Also the process's error log (g_el): the counts by kind, the first ERR_SAMPLES errors
 * described, the successes after the first error; run_bench folds its threads in. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "iobench.h"

verify_state_t g_vf;
errlog_t g_el;
static uint64_t g_last_ms;   /* the last run's measured window start (CLOCK_MONOTONIC ns) */

const char *verify_kind_name(int k)
{
    static const char *n[] = {"ok", "corrupt", "misplaced", "stale"};
    return k >= 0 && k < VK_N ? n[k] : "unknown";
}

uint64_t verify_mismatches(void)
{
    return g_vf.bad[VK_CORRUPT] + g_vf.bad[VK_MISPLACED] + g_vf.bad[VK_STALE];
}

static void off_reason(options_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void off_reason(options_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_vf.reason, sizeof g_vf.reason, fmt, ap);
    va_end(ap);
    o->verify_on = 0;
    g_vf.enabled = 0;
}

/* the marker of a --dir says whether prepare stamped the files (files.c) */
static int dir_stamped(const options_t *o)
{
    char path[4096], buf[512] = {0};
    snprintf(path, sizeof path, "%s/%s", o->dir, MARKER_NAME);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 && strstr(buf, "\n" MARKER_VERIFY "\n") != NULL;
}

static int verify_decide(options_t *o, int prepare_here);

/* a run or precondition that writes without --verify leaves the files unstamped: the marker
 * stops saying "stamped" before the first write, so a later --verify run does not take the
 * new data for corruption (it runs with verify off and says why) */
static int unstamp_marker(const options_t *o)
{
    char path[4096], buf[512] = {0};
    snprintf(path, sizeof path, "%s/%s", o->dir, MARKER_NAME);
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;                  /* no marker: open_test_files refuses the run */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    char *at = n > 0 ? strstr(buf, "\n" MARKER_VERIFY "\n") : NULL;
    int rc = 0;
    if (at) {
        size_t keep = (size_t)(at - buf) + 1;
        if (ftruncate(fd, (off_t)keep) != 0 || fsync(fd) != 0) {
            err_msg("--dir %s: cannot rewrite %s: %s", o->dir, MARKER_NAME, strerror(errno));
            rc = EXIT_ENV;
        }
    }
    close(fd);
    return rc;
}

int verify_setup(options_t *o, int prepare_here)
{
    memset(&g_vf, 0, sizeof g_vf);
    crc32c_init();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40) ^ o->seed;
    g_vf.run_id = splitmix64(&x);
    int rc = verify_decide(o, prepare_here);
    if (!rc && o->witness && o->command == CMD_RUN && !g_wit.ent) {
        err_msg("--witness needs --verify in effect, and it is off: %s", g_vf.reason[0] ? g_vf.reason : g_vf.map_reason);
        return EXIT_USAGE;
    }
    int writes = o->command == CMD_PRECONDITION ||
                 (o->command == CMD_RUN && o->mode != MODE_SEQRD && o->mode != MODE_RNDRD);
    if (!rc && !o->verify_on && writes && !o->device) rc = unstamp_marker(o);
    return rc;
}

static int verify_decide(options_t *o, int prepare_here)
{
    o->verify_on = 0;
    if (!o->verify) { snprintf(g_vf.reason, sizeof g_vf.reason, "not requested (--verify off)"); return 0; }
    if (o->command == CMD_CLEANUP) { snprintf(g_vf.reason, sizeof g_vf.reason, "cleanup reads nothing"); return 0; }
    g_vf.enabled = 1;
    o->verify_on = 1;
    if (o->block_size % VERIFY_CHUNK) {
        off_reason(o, "--block-size %llu is not a multiple of 4 KiB, the unit of the verify header",
                   (unsigned long long)o->block_size);
        return 0;
    }
    if (o->command == CMD_RUN && o->mode == MODE_DBPATTERN) {
        off_reason(o, "dbpattern: page readers and flushers share pages by design, a read may meet a write in progress");
        return 0;
    }
    if (o->command == CMD_RUN && !prepare_here && !o->device && !dir_stamped(o)) {
        off_reason(o, "the test files were not prepared with --verify (run with --prepare --verify)");
        return 0;
    }
    uint64_t bpf = o->file_size / o->block_size, blocks = bpf * o->file_num;
    if (o->command == CMD_RUN && blocks < (uint64_t)o->threads) {
        off_reason(o, "--threads %d is more than the %llu blocks of the working set (each block belongs to one thread)",
                   o->threads, (unsigned long long)blocks);
        return 0;
    }
    g_vf.bs = o->block_size;
    g_vf.bpf = bpf;
    g_vf.map_blocks = blocks;
    g_vf.map_bytes = blocks * sizeof(uint32_t);
    if (o->command != CMD_RUN) {
        snprintf(g_vf.map_reason, sizeof g_vf.map_reason, "%s reads nothing", o->command == CMD_PREPARE ? "prepare" : "precondition");
        g_vf.map_bytes = 0;
        return 0;
    }
    if (o->witness && g_vf.map_bytes > o->verify_map_max) {
        err_msg("--witness needs the generation map: %llu blocks need %llu bytes, more than --verify-map-max %llu "
                "(a smaller --size / --total-size or a larger --verify-map-max)", (unsigned long long)blocks,
                (unsigned long long)g_vf.map_bytes, (unsigned long long)o->verify_map_max);
        return EXIT_USAGE;
    }
    if (g_vf.map_bytes > o->verify_map_max) {
        snprintf(g_vf.map_reason, sizeof g_vf.map_reason,
                 "%llu blocks need %llu bytes of generation map, more than --verify-map-max %llu: no stale detection",
                 (unsigned long long)blocks, (unsigned long long)g_vf.map_bytes, (unsigned long long)o->verify_map_max);
        g_vf.map_bytes = 0;
        return 0;
    }
    g_vf.map = calloc(blocks ? blocks : 1, sizeof *g_vf.map);
    if (!g_vf.map) {
        snprintf(g_vf.map_reason, sizeof g_vf.map_reason, "out of memory for %llu bytes of generation map: no stale detection",
                 (unsigned long long)g_vf.map_bytes);
        g_vf.map_bytes = 0;
        return 0;
    }
    g_vf.tracked = 1;
    return o->witness ? witness_open(o, blocks, bpf) : 0;
}

static inline void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static inline uint32_t chunk_crc(const unsigned char *c)
{
    return crc32c(crc32c(0, c, 28), c + VERIFY_HDR, VERIFY_CHUNK - VERIFY_HDR);
}

uint32_t verify_chunk_crc(const unsigned char *chunk)
{
    return chunk_crc(chunk);
}

void verify_stamp(unsigned char *buf, uint64_t len, uint32_t target, uint64_t off, uint32_t gen)
{
    for (uint64_t p = 0; p + VERIFY_CHUNK <= len; p += VERIFY_CHUNK) {
        unsigned char *c = buf + p;
        put32(c, VERIFY_MAGIC);
        put32(c + 4, target);
        put64(c + 8, off + p);
        put64(c + 16, g_vf.run_id);
        put32(c + 24, gen);
        put32(c + 28, chunk_crc(c));
    }
}

static void sample(vctx_t *vc, int op, int kind, int fi, uint64_t off, int64_t found_off, const char *exp, const char *fnd)
{
    if (vc->ns >= VERIFY_SAMPLES) return;
    vsample_t *s = &vc->s[vc->ns++];
    s->op = op;
    s->kind = kind;
    s->fi = fi;
    s->off = off;
    s->found_off = found_off;
    snprintf(s->expected, sizeof s->expected, "%s", exp);
    snprintf(s->found, sizeof s->found, "%s", fnd);
    s->t = now_ns();
}

/* one block read back: VK_OK or the class of its first bad 4 KiB */
int verify_check(vctx_t *vc, int op, const options_t *o, const uint32_t *map, int fi, uint64_t off,
                 const unsigned char *buf, uint64_t len)
{
    vc->checked++;
    const uint32_t target = (uint32_t)fi;
    uint32_t want = 0, flagged = 0;
    if (map) {
        uint64_t blk = (uint64_t)fi * g_vf.bpf + off / g_vf.bs;
        want = map[blk] & 0x7fffffffu;
        flagged = map[blk] >> 31;
    }
    char e[64], f[64];
    for (uint64_t p = 0; p + VERIFY_CHUNK <= len; p += VERIFY_CHUNK) {
        const unsigned char *c = buf + p;
        const uint64_t co = off + p;
        uint32_t magic = get32(c), stored = get32(c + 28), calc = chunk_crc(c);
        if (magic != VERIFY_MAGIC || stored != calc) {
            if (magic != VERIFY_MAGIC) {
                snprintf(e, sizeof e, "magic 0x%08x", VERIFY_MAGIC);
                snprintf(f, sizeof f, "magic 0x%08x", magic);
            } else {
                snprintf(e, sizeof e, "crc32c 0x%08x", calc);
                snprintf(f, sizeof f, "0x%08x", stored);
            }
            vc->bad[VK_CORRUPT]++;
            sample(vc, op, VK_CORRUPT, fi, co, -1, e, f);
            return VK_CORRUPT;
        }
        uint64_t hoff = get64(c + 8);
        uint32_t htgt = get32(c + 4), hgen = get32(c + 24);
        uint64_t hrun = get64(c + 16);
        if (hoff != co || htgt != target) {
            snprintf(e, sizeof e, "offset %llu target %u", (unsigned long long)co, target);
            snprintf(f, sizeof f, "offset %llu target %u", (unsigned long long)hoff, htgt);
            vc->bad[VK_MISPLACED]++;
            sample(vc, op, VK_MISPLACED, fi, co, (int64_t)hoff, e, f);
            return VK_MISPLACED;
        }
        /* not written by this process: any generation; a write of it failed since its last
         * acknowledged one: the drive may hold any of them (the error is reported) */
        if (!want || flagged) continue;
        if (hrun != g_vf.run_id || hgen != want) {
            snprintf(e, sizeof e, "gen %u run %016llx", want, (unsigned long long)g_vf.run_id);
            snprintf(f, sizeof f, "gen %u run %016llx", hgen, (unsigned long long)hrun);
            vc->bad[VK_STALE]++;
            sample(vc, op, VK_STALE, fi, co, -1, e, f);
            return VK_STALE;
        }
    }
    (void)o;
    return VK_OK;
}

static void vsample_add(const vsample_t *s)
{
    int n = g_vf.ns, i = n < VERIFY_SAMPLES ? n : VERIFY_SAMPLES;
    if (n >= VERIFY_SAMPLES && s->t >= g_vf.s[VERIFY_SAMPLES - 1].t) return;
    while (i > 0 && g_vf.s[i - 1].t > s->t) {
        if (i < VERIFY_SAMPLES) g_vf.s[i] = g_vf.s[i - 1];
        i--;
    }
    g_vf.s[i] = *s;
    if (n < VERIFY_SAMPLES) g_vf.ns++;
}

static void vctx_fold(const vctx_t *vc)
{
    g_vf.checked += vc->checked;
    for (int k = 0; k < VK_N; k++) g_vf.bad[k] += vc->bad[k];
    for (int i = 0; i < vc->ns; i++) vsample_add(&vc->s[i]);
}

static void esample_add(const esample_t *e, uint64_t ms)
{
    int n = g_el.n, i = n < ERR_SAMPLES ? n : ERR_SAMPLES;
    if (n >= ERR_SAMPLES && e->t >= g_el.s[ERR_SAMPLES - 1].t) return;
    while (i > 0 && g_el.s[i - 1].t > e->t) {
        if (i < ERR_SAMPLES) { g_el.s[i] = g_el.s[i - 1]; g_el.t_s[i] = g_el.t_s[i - 1]; }
        i--;
    }
    g_el.s[i] = *e;
    g_el.t_s[i] = ((double)e->t - (double)ms) / 1e9;
    if (n < ERR_SAMPLES) g_el.n++;
}

void verify_fold(bench_t *b)
{
    uint64_t ms = atomic_load(&b->measure_start);
    if (ms == UINT64_MAX) ms = b->t_start + (uint64_t)(b->o->warmup_s * 1e9);
    g_last_ms = ms;
    for (int i = 0; i < b->nth; i++) {
        thread_t *t = &b->th[i];
        vctx_fold(&t->vc);
        g_el.total += t->err_total;
        for (int k = 0; k < ERR_KINDS; k++) g_el.by_kind[k] += t->errs[k];
        g_el.ok_after_first += t->ok_after;
        for (int j = 0; j < t->nes; j++) esample_add(&t->es[j], ms);
    }
    if (atomic_load(&b->max_err_stop)) g_el.stopped_max = 1;
}

void errlog_message(const esample_t *e, const options_t *o, char *buf, size_t n)
{
    const char *why = e->err ? strerror(e->err) : "short transfer";
    char who[24] = "";
    if (e->thread >= 0) snprintf(who, sizeof who, "thread %d: ", e->thread);
    if (e->fi == -2)
        snprintf(buf, n, "%s%s: %s", who, e->op, why);
    else if (o->device)
        snprintf(buf, n, "%s%s %s at offset %llu: %s", who, e->op, o->device, (unsigned long long)(e->off + g_io_base), why);
    else if (e->fi < 0)
        snprintf(buf, n, "%s%s %s/" DB_LOG_NAME " at offset %llu: %s", who, e->op, o->dir, (unsigned long long)e->off, why);
    else
        snprintf(buf, n, "%s%s %s/" FILE_PREFIX "%d at offset %llu: %s", who, e->op, o->dir, e->fi,
                 (unsigned long long)e->off, why);
}

/* An I/O error outside the threads (the read-back pass, a prepare write): counted and
 * described in the process's error log like the threads' own (docs/iobench-json.md). */
void errlog_add(const char *op, int fi, uint64_t off, int err)
{
    int kind = err ? (err < ERR_SLOTS ? err : ERR_OTHER) : (strstr(op, "write") ? ERR_SHORT_WRITE : ERR_SHORT_READ);
    esample_t e = {op, fi, off, err, kind, -1, now_ns()};
    g_el.total++;
    g_el.by_kind[kind]++;
    esample_add(&e, g_last_ms);
}

/* --verify-pass: read the whole data set back in large sequential reads, check every block.
 * A chunk that fails is read again block by block up to its first bad block; the rest of
 * that chunk is skipped (a bad region is mapped chunk by chunk, as ddrescue skips ahead,
 * instead of spending --max-errors inside one region), and every read that succeeds after
 * the first error of the process counts in ok_after_first: the drive still answers. */
int verify_run_pass(options_t *o, int *fds)
{
    if (!o->verify_on) return 0;
    if (!o->direct && !o->device) drop_cache(o, fds);
    const uint64_t bs = o->block_size;
    uint64_t chunk = (1u << 20) / bs * bs;
    if (chunk < bs) chunk = bs;
    unsigned char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, chunk) != 0) return EXIT_INTERNAL;
    vctx_t *vc = calloc(1, sizeof *vc);
    if (!vc) { free(buf); return EXIT_INTERNAL; }
    uint64_t t0 = now_ns(), blocks = 0, bytes = 0, errs = 0;
    for (uint64_t fi = 0; fi < o->file_num && !atomic_load(&g_stop); fi++) {
        for (uint64_t off = 0; off < o->file_size && !atomic_load(&g_stop) && errs < o->max_errors;) {
            uint64_t n = o->file_size - off < chunk ? o->file_size - off : chunk;
            ssize_t r = pread(fds[fi], buf, n, (off_t)(off + g_io_base));
            if (r < 0 && errno == EINTR) continue;
            if (r != (ssize_t)n) {
                /* the chunk failed: read it block by block up to its first bad block */
                for (uint64_t p = 0; p < n && errs < o->max_errors; p += bs) {
                    ssize_t q = pread(fds[fi], buf, bs, (off_t)(off + p + g_io_base));
                    if (q < 0 && errno == EINTR) { p -= bs; continue; }
                    if (q != (ssize_t)bs) {
                        errlog_add("verify_pass", (int)fi, off + p, q < 0 ? errno : 0);
                        errs++;
                        break;
                    }
                    if (g_el.total) g_el.ok_after_first++;
                    verify_check(vc, VOP_PASS, o, g_vf.map, (int)fi, off + p, buf, bs);
                    blocks++;
                    bytes += bs;
                }
                off += n;
                continue;
            }
            if (g_el.total) g_el.ok_after_first++;
            for (uint64_t p = 0; p < n; p += bs) verify_check(vc, VOP_PASS, o, g_vf.map, (int)fi, off + p, buf + p, bs);
            blocks += n / bs;
            bytes += n;
            off += n;
        }
    }
    if (errs >= o->max_errors) g_el.stopped_max = 1;
    g_vf.pass_elapsed_s = (double)(now_ns() - t0) / 1e9;
    g_vf.pass_blocks = blocks;
    g_vf.pass_bytes = bytes;
    g_vf.pass_done = 1;
    vctx_fold(vc);
    free(vc);
    free(buf);
    return 0;
}
