/* --mode dbpattern: an InnoDB-like server.
 *
 *   readers (--threads)   random page reads (pread of --block-size) over the test files; after
 *                         every --db-reads-per-txn reads a reader commits its transaction and
 *                         waits until the log writer has made it durable (what a committing
 *                         transaction waits for with innodb_flush_log_at_trx_commit=1).
 *   log writer (1)        group commit: takes every pending commit (at most
 *                         --db-group-commit-max), writes one --db-log-block sequentially to
 *                         ib_logfile.iobench (circular), fdatasyncs it, then publishes.
 *   flushers (--db-flushers) random page writes (pwrite of --block-size), optionally paced
 *                         to --db-flush-rate pages/s over all flushers.
 *
 * Hand-off without a lock: each reader owns a cache line with two counters, `req` (commits it
 * asked for, written by the reader) and `durable` (commits made durable for it, written by the
 * writer). The writer sums `req - taken` over readers with atomic loads; sleeping on either
 * side is a futex on a counter (`bell` for the writer, `epoch` for readers), touched once per
 * transaction / per group commit, never per I/O. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "iobench.h"

typedef struct dbslot {
    _Atomic uint64_t req;        /* commits requested by this reader */
    _Atomic uint64_t durable;    /* commits durable for this reader (log writer writes) */
} __attribute__((aligned(128))) dbslot_t;

typedef struct dbstate {
    dbslot_t *slot;              /* one per reader */
    uint64_t *taken;             /* log writer only: req included in a group so far */
    uint64_t *pend;              /* log writer only: scratch */
    _Atomic unsigned epoch __attribute__((aligned(64)));   /* bumped after each group commit */
    _Atomic unsigned bell __attribute__((aligned(64)));    /* bumped on each commit request */
    _Atomic int writer_waiting;
    _Atomic int readers_left;
    _Atomic int log_failed;
    int log_fd;
    int readers, flushers;
    dbresult_t res;              /* written by the log writer, read by main after the join */
} dbstate_t;

static void fwait(_Atomic unsigned *addr, unsigned val, long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    syscall(SYS_futex, (void *)addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void fwake(_Atomic unsigned *addr)
{
    syscall(SYS_futex, (void *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ib_logfile.iobench: created (O_NOFOLLOW, inside the marked directory) and filled with random
 * data when missing or shorter than --db-log-size; kept between runs; removed by cleanup. */
int db_open_log(const options_t *o, int *fd_out)
{
    *fd_out = -1;
    int dfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) { err_msg("--dir %s: cannot open: %s", o->dir, strerror(errno)); return EXIT_ENV; }
    struct stat st;
    int existed = fstatat(dfd, DB_LOG_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (existed && !S_ISREG(st.st_mode)) {
        err_msg("--dir %s: %s exists and is not a regular file (symlink?); refusing to touch it", o->dir, DB_LOG_NAME);
        close(dfd);
        return EXIT_ENV;
    }
    if (!existed || (uint64_t)st.st_size < o->db_log_size) {
        struct statvfs vf;
        uint64_t have = existed ? (uint64_t)st.st_blocks * 512 : 0;
        if (statvfs(o->dir, &vf) == 0 && vf.f_blocks > 0) {
            uint64_t avail = (uint64_t)vf.f_bavail * vf.f_frsize + have;
            uint64_t need = o->db_log_size + (64ull << 20);
            if (avail < need) {
                err_msg("not enough free space in --dir %s for the dbpattern log %s: need %llu bytes "
                        "(--db-log-size + 64 MiB margin), available %llu bytes", o->dir, DB_LOG_NAME,
                        (unsigned long long)need, (unsigned long long)avail);
                close(dfd);
                return EXIT_ENV;
            }
        }
        int fd = openat(dfd, DB_LOG_NAME, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            err_msg("--dir %s: cannot create %s: %s", o->dir, DB_LOG_NAME, strerror(errno));
            close(dfd);
            return EXIT_ENV;
        }
        const size_t chunk = 1 << 20;
        unsigned char *buf = malloc(chunk);
        uint64_t rs[4];
        rng_seed(rs, o->seed ^ 0x1061f11eull, 0xfffe);
        int ok = buf != NULL;
        for (uint64_t off = 0; ok && off < o->db_log_size; off += chunk) {
            size_t n = o->db_log_size - off < chunk ? (size_t)(o->db_log_size - off) : chunk;
            rng_fill(rs, buf, n);
            ssize_t w = pwrite(fd, buf, n, (off_t)off);
            if (w != (ssize_t)n) {
                err_msg("dbpattern: writing %s/%s at offset %llu failed: %s", o->dir, DB_LOG_NAME,
                        (unsigned long long)off, w < 0 ? strerror(errno) : "short write");
                ok = 0;
            }
        }
        free(buf);
        if (ok && fdatasync(fd) != 0) { err_msg("dbpattern: fdatasync %s/%s: %s", o->dir, DB_LOG_NAME, strerror(errno)); ok = 0; }
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
        if (!ok) {
            if (!existed) unlinkat(dfd, DB_LOG_NAME, 0);
            close(dfd);
            return EXIT_IOERR;
        }
        fsync(dfd);
    }
    int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | (o->direct ? O_DIRECT : 0);
    int fd = openat(dfd, DB_LOG_NAME, flags);
    int e = errno;
    close(dfd);
    if (fd < 0) {
        err_msg("--dir %s: cannot open %s: %s", o->dir, DB_LOG_NAME, strerror(e));
        return EXIT_ENV;
    }
    if (!o->keep_cache) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);   /* like the test files */
    *fd_out = fd;
    return 0;
}

struct dbstate *db_alloc(const options_t *o, int log_fd)
{
    dbstate_t *d = NULL;
    if (posix_memalign((void **)&d, 128, sizeof *d) != 0) return NULL;
    memset(d, 0, sizeof *d);
    d->log_fd = log_fd;
    d->readers = o->threads;
    d->flushers = o->db_flushers;
    return d;
}

int db_setup(bench_t *b)
{
    dbstate_t *d = b->db;
    int r = d->readers;
    if (posix_memalign((void **)&d->slot, 128, (size_t)r * sizeof *d->slot) != 0) { d->slot = NULL; return -1; }
    memset(d->slot, 0, (size_t)r * sizeof *d->slot);
    d->taken = calloc((size_t)r, sizeof *d->taken);
    d->pend = calloc((size_t)r, sizeof *d->pend);
    if (!d->taken || !d->pend) return -1;
    atomic_store(&d->readers_left, r);
    for (int i = 0; i < b->nth; i++) {
        thread_t *t = &b->th[i];
        t->role = i < r ? DB_READER : i == r ? DB_LOGWRITER : DB_FLUSHER;
        if (t->role == DB_READER && !(t->xst = calloc(1, sizeof *t->xst))) return -1;
    }
    return 0;
}

void db_free(bench_t *b)
{
    dbstate_t *d = b->db;
    if (!d) return;
    free(d->slot); free(d->taken); free(d->pend);
    free(d);
    b->db = NULL;
}

void db_result(const bench_t *b, dbresult_t *r)
{
    memset(r, 0, sizeof *r);
    if (!b->db) return;
    *r = b->db->res;
    for (int i = 0; i < b->nth; i++)
        if (b->th[i].role == DB_FLUSHER) r->slots_dropped += b->th[i].slots_dropped;
}

static void rand_page(thread_t *t, uint64_t *fi, uint64_t *off)
{
    const bench_t *b = t->b;
    uint64_t blk = rng_bounded(t->rng, b->total_blocks);
    *fi = blk / b->blocks_per_file;
    *off = (blk % b->blocks_per_file) * b->o->block_size;
}

static void reader(thread_t *t)
{
    bench_t *b = t->b;
    dbstate_t *d = b->db;
    dbslot_t *slot = &d->slot[t->id];
    const uint64_t bs = b->o->block_size, per_txn = b->o->db_reads_per_txn;
    uint64_t seq = 0, k = 0;
    for (;;) {
        if (stop_requested(b) || atomic_load_explicit(&d->log_failed, memory_order_relaxed)) break;
        uint64_t fi, off;
        rand_page(t, &fi, &off);
        uint64_t t0 = now_ns();
        ssize_t r = pread(b->fds[fi], t->buf, bs, (off_t)off);
        uint64_t t1 = now_ns();
        if (__builtin_expect(r != (ssize_t)bs, 0)) {
            if (r < 0 && errno == EINTR) continue;
            int e = r < 0 ? errno : 0;
            record_error(t, r < 0 ? (e < ERR_SLOTS ? e : ERR_OTHER) : ERR_SHORT_READ, (int)fi, off, "read", e);
            if (t1 >= bench_deadline(b)) break;
            continue;                /* a bad page does not stop the reader (--max-errors does) */
        }
        record_op(t, OP_READ, t0, t1, bs);
        if (++k >= per_txn) {
            k = 0;
            uint64_t c0 = now_ns();
            seq++;
            atomic_store(&slot->req, seq);
            atomic_fetch_add(&d->bell, 1);
            if (atomic_load(&d->writer_waiting)) fwake(&d->bell);
            int failed = 0;
            for (;;) {
                unsigned e = atomic_load(&d->epoch);
                if (atomic_load_explicit(&slot->durable, memory_order_acquire) >= seq) break;
                if (atomic_load(&d->log_failed)) { failed = 1; break; }
                fwait(&d->epoch, e, 100000000L);
            }
            if (failed) break;
            uint64_t c1 = now_ns();
            if (c1 >= b->measure_start) {
                opstat_add(t->xst, c1 - c0, 0);
                t->txns++;
            }
            t1 = c1;
        }
        if (t1 >= bench_deadline(b)) break;
    }
    atomic_fetch_sub(&d->readers_left, 1);
    atomic_fetch_add(&d->bell, 1);
    fwake(&d->bell);
}

static void log_writer(thread_t *t)
{
    bench_t *b = t->b;
    dbstate_t *d = b->db;
    const options_t *o = b->o;
    const uint64_t lb = o->db_log_block;
    const int nr = d->readers;
    const uint64_t gmax = o->db_group_max > 0 ? (uint64_t)o->db_group_max : UINT64_MAX;
    uint64_t log_off = 0;
    int rr = 0;
    for (;;) {
        unsigned bell = atomic_load(&d->bell);
        uint64_t group = 0;
        for (int j = 0; j < nr; j++) {
            int i = (rr + j) % nr;
            uint64_t q = atomic_load(&d->slot[i].req);
            d->pend[i] = 0;
            if (q > d->taken[i] && group < gmax) {
                uint64_t n = q - d->taken[i];
                if (n > gmax - group) n = gmax - group;
                d->pend[i] = n;
                group += n;
            }
        }
        if (group == 0) {
            if (atomic_load(&d->readers_left) == 0) break;
            atomic_store(&d->writer_waiting, 1);
            fwait(&d->bell, bell, 10000000L);
            atomic_store(&d->writer_waiting, 0);
            continue;
        }
        rr = (rr + 1) % nr;
        unsigned char *buf = write_buffer(t, log_off);
        ssize_t w = pwrite(d->log_fd, buf, lb, (off_t)log_off);
        if (w != (ssize_t)lb) {
            if (w < 0 && errno == EINTR) continue;
            int e = w < 0 ? errno : 0;
            record_error(t, w < 0 ? (e < ERR_SLOTS ? e : ERR_OTHER) : ERR_SHORT_WRITE, -1, log_off, "log write", e);
            break;
        }
        log_off += lb;
        if (log_off + lb > o->db_log_size) log_off = 0;
        uint64_t f0 = now_ns();
        int r = fdatasync(d->log_fd);
        uint64_t f1 = now_ns();
        if (r != 0) {
            int e = errno;
            record_error(t, e < ERR_SLOTS ? e : ERR_OTHER, -1, 0, "log fdatasync", e);
            break;
        }
        record_op(t, OP_FSYNC, f0, f1, 0);
        if (f1 >= b->measure_start) {
            d->res.commits++;
            d->res.txns_in_commits += group;
            d->res.log_writes++;
            d->res.log_bytes += lb;
        }
        for (int i = 0; i < nr; i++) {
            if (!d->pend[i]) continue;
            d->taken[i] += d->pend[i];
            atomic_store_explicit(&d->slot[i].durable, d->taken[i], memory_order_release);
        }
        atomic_fetch_add(&d->epoch, 1);
        fwake(&d->epoch);
    }
    if (t->err_total) {
        atomic_store(&d->log_failed, 1);
        atomic_fetch_add(&d->epoch, 1);
        fwake(&d->epoch);
    }
}

/* Slots of a pace (one every gap ns from `from`) due in [from, until) and in the measured window. */
static uint64_t slots_due(uint64_t from, uint64_t until, uint64_t gap, uint64_t ms)
{
    if (until <= ms) return 0;     /* also a window not opened yet (measure_start UINT64_MAX) */
    if (from < ms) from += (ms - from + gap - 1) / gap * gap;
    return from < until ? (until - from + gap - 1) / gap : 0;
}

/* A cap, not an average, like --rate-iops (engine_sync.c): a flusher that falls more than 10 slots
 * behind (a slow write, or no CPU for it) skips the slots it passed instead of bursting, and keeps its
 * schedule. The slots it skips, and those still due when the window ends, are counted
 * (t->slots_dropped): every slot of the window is a write or dropped, so a rate below the one asked
 * says whether the flushers kept their pace. */
static void flusher(thread_t *t)
{
    bench_t *b = t->b;
    const options_t *o = b->o;
    const uint64_t bs = o->block_size;
    const uint64_t gap = o->db_flush_rate > 0 ? (uint64_t)(1e9 * (double)b->db->flushers / o->db_flush_rate) : 0;
    /* the pace starts when the threads were released, not when this one first ran: a loaded
     * host runs a thread 100 ms and more after the release, and its slots are due all the same */
    uint64_t next = b->t_start ? b->t_start : now_ns();
    for (;;) {
        if (stop_requested(b)) break;
        if (gap) {
            uint64_t now = now_ns();
            if (now < next) {
                const uint64_t deadline = bench_deadline(b);
                uint64_t until = next < deadline ? next : deadline;
                if (until - now > 50000000ull) until = now + 50000000ull;   /* look at the stop flag */
                struct timespec ts = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                if (now_ns() >= bench_deadline(b)) break;
                continue;
            }
            next += gap;
            if (next + 10 * gap < now) {   /* do not burst after a stall: skip to the first slot not past */
                t->slots_dropped += slots_due(next, now, gap, atomic_load(&b->measure_start));
                next += (now - next + gap - 1) / gap * gap;
            }
        }
        uint64_t fi, off;
        rand_page(t, &fi, &off);
        unsigned char *wb = write_buffer(t, off);
        uint64_t t0 = now_ns();
        ssize_t r = pwrite(b->fds[fi], wb, bs, (off_t)off);
        uint64_t t1 = now_ns();
        if (__builtin_expect(r != (ssize_t)bs, 0)) {
            if (r < 0 && errno == EINTR) continue;
            int e = r < 0 ? errno : 0;
            record_error(t, r < 0 ? (e < ERR_SLOTS ? e : ERR_OTHER) : ERR_SHORT_WRITE, (int)fi, off, "write", e);
            if (t1 >= bench_deadline(b)) break;
            continue;
        }
        record_op(t, OP_WRITE, t0, t1, bs);
        if (t1 >= bench_deadline(b)) break;
    }
    if (gap) {   /* the slots due before the window closed that no write took */
        uint64_t end = now_ns(), deadline = bench_deadline(b);
        t->slots_dropped += slots_due(next, end < deadline ? end : deadline, gap, atomic_load(&b->measure_start));
    }
}

void db_thread(thread_t *t)
{
    if (atomic_load(&t->b->stop)) {
        if (t->role == DB_READER) atomic_fetch_sub(&t->b->db->readers_left, 1);
        return;
    }
    if (t->role == DB_READER) reader(t);
    else if (t->role == DB_LOGWRITER) log_writer(t);
    else flusher(t);
}
