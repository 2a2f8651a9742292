/* Thread setup, per-I/O bookkeeping (no locks, no shared counters), the run itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include "iobench.h"

atomic_int g_stop;
atomic_int g_signal;
start_state_t g_start;
static FILE *g_live;      /* --live-log */
static int g_live_run;    /* run_bench calls that wrote to it (search steps, steady-state rounds) */

int live_open(const char *path)
{
    g_live = fopen(path, "a");
    return g_live ? 0 : -1;
}

static void ival_grow(thread_t *t, uint64_t idx)
{
    if (idx < t->iv_cap) return;
    uint64_t ncap = t->iv_cap ? t->iv_cap * 2 : 16;
    while (ncap <= idx) ncap *= 2;
    ival_t *n = realloc(t->iv, ncap * sizeof *n);
    if (!n) return;                       /* keep old; overflow intervals are dropped */
    memset(n + t->iv_cap, 0, (ncap - t->iv_cap) * sizeof *n);
    t->iv = n;
    t->iv_cap = ncap;
}

/* called for every completed I/O; t1 is the completion time */
void record_op(thread_t *t, int kind, uint64_t t0, uint64_t t1, uint64_t bytes)
{
    bench_t *b = t->b;
    if (__builtin_expect(atomic_load_explicit(&b->err_seen, memory_order_relaxed), 0)) t->ok_after++;
    const uint64_t ms = atomic_load_explicit(&b->measure_start, memory_order_relaxed);
    if (t1 < ms) return;   /* warmup */
    uint64_t lat = t1 - t0;
    opstat_add(&t->st[kind], lat, bytes);
    t->busy_ns += lat;
    t->last_done_ns = t1;
    if (b->live && kind != OP_FSYNC) {      /* one writer: plain stores, read by live_line */
        atomic_store_explicit(&t->live[kind][0], t->st[kind].n, memory_order_relaxed);
        atomic_store_explicit(&t->live[kind][1], t->st[kind].bytes, memory_order_relaxed);
        atomic_store_explicit(&t->live[kind][2], t->st[kind].sum, memory_order_relaxed);
    }
    if (kind != OP_FSYNC) t->measured++;
    if (b->ival_ns) {
        if (t1 >= t->iv_end) {
            uint64_t idx = (t1 - ms) / b->ival_ns;
            t->iv_cur = idx;
            t->iv_end = ms + (idx + 1) * b->ival_ns;
            ival_grow(t, idx);
            if (idx + 1 > t->iv_used) t->iv_used = idx + 1;
        }
        if (t->iv_cur < t->iv_cap) {
            ival_t *v = &t->iv[t->iv_cur];
            v->ops[kind]++;
            v->bytes[kind] += bytes;
            v->lat_sum[kind] += lat;
            if (lat > v->lat_max[kind]) v->lat_max[kind] = lat;
            v->hist[kind][hist_index_bits(lat, IVAL_BITS, IVAL_MAX_EXP)]++;
        }
    }
}

/* an I/O error: counted by kind, the thread's first ERR_SAMPLES described; the run stops at
 * --max-errors errors over all threads (docs/iobench.md "I/O errors") */
void record_error(thread_t *t, int kind, int fileidx, uint64_t off, const char *what, int err)
{
    bench_t *b = t->b;
    uint64_t now = now_ns();
    t->errs[kind]++;
    t->err_total++;
    if (t->nes < ERR_SAMPLES) t->es[t->nes++] = (esample_t){what, fileidx, off, err, kind, t->id, now};
    if (t->err_total == 1) {
        t->first_err_kind = kind;
        t->first_err_t = now;
        errlog_message(&t->es[0], b->o, t->first_err, sizeof t->first_err);
    }
    atomic_store_explicit(&b->err_seen, 1, memory_order_relaxed);
    if (atomic_fetch_add(&b->err_count, 1) + 1 >= b->o->max_errors) {
        atomic_store(&b->max_err_stop, 1);
        atomic_store(&b->stop, 1);
    }
}

void pick_op(thread_t *t, int *kind, uint64_t *fileidx, uint64_t *off)
{
    const bench_t *b = t->b;
    const options_t *o = b->o;
    uint64_t blk;
    switch (o->mode) {
    case MODE_SEQWR: case MODE_SEQREWR: case MODE_SEQRD:
        blk = t->seq_pos++;
        if (t->seq_pos >= t->seq_end) t->seq_pos = t->seq_start;
        *kind = o->mode == MODE_SEQRD ? OP_READ : OP_WRITE;
        break;
    case MODE_RNDRD:
        blk = rng_bounded(t->rng, t->rnd_n) * t->rnd_mul + t->rnd_add;
        *kind = OP_READ;
        break;
    case MODE_RNDWR:
        blk = rng_bounded(t->rng, t->rnd_n) * t->rnd_mul + t->rnd_add;
        *kind = OP_WRITE;
        break;
    default: /* rndrw: deterministic interleave keeping reads/writes at rw_ratio */
        blk = rng_bounded(t->rng, t->rnd_n) * t->rnd_mul + t->rnd_add;
        if ((double)t->reads_done < o->rw_ratio * (double)(t->writes_done + 1)) { *kind = OP_READ; t->reads_done++; }
        else { *kind = OP_WRITE; t->writes_done++; }
        break;
    }
    *fileidx = blk / b->blocks_per_file;
    *off = (blk % b->blocks_per_file) * o->block_size;
    if (o->debug_offsets_hash) {
        uint64_t h = t->offsets_hash ^ (blk * 0x9e3779b97f4a7c15ull + (uint64_t)*kind);
        t->offsets_hash = rotl64(h, 27) * 0xbf58476d1ce4e5b9ull;
    }
}

/* Write data: one of the thread's wpool_slots random blocks, picked at random (so
 * consecutive blocks rarely repeat and do not compress against each other), with every
 * 4 KiB stamped with the offset and a sequence number (defeats dedupe). */
unsigned char *write_buffer(thread_t *t, uint64_t off)
{
    uint64_t bs = t->b->o->block_size;
    unsigned char *buf = t->wpool + (rng_next(t->brng) >> 32) % t->wpool_slots * bs;
    uint64_t s = ++t->wseq ^ ((uint64_t)t->id << 48);
    for (uint64_t p = 0; p + 16 <= bs; p += 4096) {
        uint64_t a = off + p, c = s;
        memcpy(buf + p, &a, 8);
        memcpy(buf + p + 8, &c, 8);
    }
    return buf;
}

int fsync_file(thread_t *t, int fileidx, int measure)
{
    const options_t *o = t->b->o;
    int fd = t->b->fds[fileidx];
    uint64_t t0 = now_ns();
    int r = o->fsync_mode == FSYNC_FDATASYNC ? fdatasync(fd) : fsync(fd);
    uint64_t t1 = now_ns();
    if (r != 0) {
        int e = errno;
        record_error(t, e < ERR_SLOTS ? e : ERR_OTHER, fileidx, 0,
                     o->fsync_mode == FSYNC_FDATASYNC ? "fdatasync" : "fsync", e);
        return -1;
    }
    t->dirty[fileidx] = 0;
    if (measure) {
        record_op(t, OP_FSYNC, t0, t1, 0);
        uint64_t ws = t->wstart[fileidx] ? t->wstart[fileidx] : t0;
        if (t1 >= atomic_load_explicit(&t->b->measure_start, memory_order_relaxed)) opstat_add(&t->cst, t1 - ws, 0);
    }
    t->wstart[fileidx] = 0;
    return 0;
}

int commit_measured(const options_t *o)
{
    return o->mode != MODE_SEQRD && o->mode != MODE_RNDRD && o->mode != MODE_DBPATTERN &&
           (o->fsync_freq > 0 || o->fsync_all);
}

const char *commit_op(const options_t *o)
{
    if (o->mode == MODE_SEQRD || o->mode == MODE_RNDRD || o->mode == MODE_DBPATTERN) return NULL;
    if (commit_measured(o)) return "commit";
    if (o->open_sync || o->open_dsync) return "write";
    return NULL;
}

/* after a successful write that started at t0 (submission): --fsync-all / --fsync-freq;
 * -1 when the fsync this write asked for failed */
int after_write(thread_t *t, int fileidx, uint64_t t0)
{
    const options_t *o = t->b->o;
    t->dirty[fileidx] = 1;
    if (!t->wstart[fileidx] || t0 < t->wstart[fileidx]) t->wstart[fileidx] = t0 ? t0 : 1;
    if (o->fsync_all) return fsync_file(t, fileidx, 1);
    if (o->fsync_freq && ++t->fsync_ctr[fileidx] >= o->fsync_freq) {
        t->fsync_ctr[fileidx] = 0;
        return fsync_file(t, fileidx, 1);
    }
    return 0;
}

void fsync_end_all(thread_t *t)
{
    const options_t *o = t->b->o;
    if (!o->fsync_end) return;
    for (uint64_t i = 0; i < o->file_num; i++)
        if (t->dirty[i] && fsync_file(t, (int)i, 1) != 0) break;
}

static void *thread_main(void *arg)
{
    thread_t *t = arg;
    bench_t *b = t->b;
    /* each thread named for its role (top -H, ps -L, /proc/<pid>/task/<tid>/comm), before the
     * release: the 15 characters Linux keeps */
    static const char *const names[] = {"iobench-worker", "iobench-reader", "iobench-log", "iobench-flusher"};
    pthread_setname_np(pthread_self(), names[t->role >= DB_READER && t->role <= DB_FLUSHER ? t->role : 0]);
    pthread_barrier_wait(&b->barrier);
    if (b->db) db_thread(t);
    else if (b->o->engine == ENGINE_URING) engine_uring_thread(t);
    else engine_sync_thread(t);
    t->stop_ns = now_ns();
    atomic_fetch_add(&b->finished, 1);
    return NULL;
}

/* --live-log: one line of the measured reads and writes completed so far, over all threads */
static void live_line(bench_t *b, int final)
{
    uint64_t v[2][3] = {{0}};
    for (int i = 0; i < b->nth; i++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 3; j++) v[k][j] += atomic_load_explicit(&b->th[i].live[k][j], memory_order_relaxed);
    uint64_t now = now_ns();
    const uint64_t ms = atomic_load(&b->measure_start);
    fprintf(g_live, "{\"epoch\": %.6f, \"elapsed_s\": %.6f, \"run\": %d, \"window\": %s, \"final\": %s, "
            "\"reads\": %llu, \"read_bytes\": %llu, \"read_lat_ns\": %llu, "
            "\"writes\": %llu, \"write_bytes\": %llu, \"write_lat_ns\": %llu}\n",
            epoch_now(), (double)(now - b->t_start) / 1e9, g_live_run, now >= ms ? "true" : "false",
            final ? "true" : "false", (unsigned long long)v[0][0], (unsigned long long)v[0][1],
            (unsigned long long)v[0][2], (unsigned long long)v[1][0], (unsigned long long)v[1][1],
            (unsigned long long)v[1][2]);
    fflush(g_live);
}

/* the main thread while the workers run: a line at every interval from the release */
static void live_loop(bench_t *b)
{
    const uint64_t iv = b->ival_ns;
    uint64_t next = b->t_start + iv;
    while (atomic_load(&b->finished) < b->nth) {
        uint64_t now = now_ns();
        if (now >= next) {
            live_line(b, 0);
            next += iv;
            if (next <= now) next = now - (now - b->t_start) % iv + iv;   /* a busy host skipped some */
            continue;
        }
        uint64_t until = next - now > 20000000ull ? now + 20000000ull : next;
        struct timespec ts = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
}

/* --start-at: the workers wait at the barrier while the main thread sleeps until the instant */
static void wait_start_at(const options_t *o)
{
    if (!(o->start_at > 0) || g_start.done) return;
    g_start.done = 1;
    g_start.requested = o->start_at;
    double sec = floor(o->start_at);
    long nsec = (long)ceil((o->start_at - sec) * 1e9);
    struct timespec ts = {(time_t)sec, nsec};
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR && !atomic_load(&g_stop)) {}
    double late = (epoch_now() - o->start_at) * 1e3;
    g_start.late_ms = late > 0 ? late : 0;
}

static size_t round4k(size_t x) { return (x + 4095) & ~(size_t)4095; }

static uint64_t wpool_slots(const options_t *o, int nth)
{
    size_t budget = nth <= 16 ? (2u << 20) : nth <= 64 ? (512u << 10) : (128u << 10);
    uint64_t s = budget / o->block_size;
    if (s > 128) s = 128;
    if (s < 4) s = 4;
    return s;
}

/* All I/O buffers (per thread: iodepth read buffers + the write pool, each slice 4 KiB
 * aligned) live in one 2 MiB-aligned arena advised MADV_HUGEPAGE: a 16 KiB request is then
 * one physically contiguous segment instead of four pages, which measurably lowers the
 * per-request cost on virtio (see bench/RESULTS-iobench.md). IOBENCH_NO_HUGE_BUFFERS=1
 * turns the advice off. */
static int arena_init(bench_t *b)
{
    const options_t *o = b->o;
    size_t bufsz = (size_t)o->block_size * (size_t)o->iodepth;
    b->arena_stride = round4k(bufsz) + round4k((size_t)wpool_slots(o, b->nth) * (size_t)o->block_size);
    size_t al = 2u << 20;
    b->arena_size = ((size_t)b->nth * b->arena_stride + al - 1) / al * al;
    if (posix_memalign((void **)&b->arena, al, b->arena_size) != 0) { b->arena = NULL; return -1; }
    if (!getenv("IOBENCH_NO_HUGE_BUFFERS")) madvise(b->arena, b->arena_size, MADV_HUGEPAGE);
    return 0;
}

static int thread_init(bench_t *b, thread_t *t, int id)
{
    const options_t *o = b->o;
    memset(t, 0, sizeof *t);
    t->id = id;
    t->b = b;
    rng_seed(t->rng, o->seed, o->stream_base + (uint64_t)id);
    int n = b->nth;
    if (o->requests) {
        t->req_limit = o->requests / (uint64_t)n + ((uint64_t)id < o->requests % (uint64_t)n ? 1 : 0);
    }
    /* sequential stripe: contiguous range of the global block space */
    t->seq_start = b->total_blocks * (uint64_t)id / (uint64_t)n;
    t->seq_end = b->total_blocks * (uint64_t)(id + 1) / (uint64_t)n;
    t->seq_pos = t->seq_start;
    /* random modes: uniform over the working set; with --verify each thread draws uniformly
     * from its own blocks (those = id mod threads), so no block is touched by two threads */
    t->rnd_n = b->total_blocks;
    t->rnd_mul = 1;
    t->rnd_add = 0;
    if (o->verify_on && !b->db) {
        t->rnd_n = b->total_blocks > (uint64_t)id ? (b->total_blocks - (uint64_t)id + (uint64_t)n - 1) / (uint64_t)n : 1;
        t->rnd_mul = (uint64_t)n;
        t->rnd_add = (uint64_t)id < b->total_blocks ? (uint64_t)id : 0;
    }
    if (b->seq_resume && b->seq_resume[id] >= t->seq_start && b->seq_resume[id] < t->seq_end) t->seq_pos = b->seq_resume[id];
    t->fsync_ctr = calloc(o->file_num, sizeof *t->fsync_ctr);
    t->dirty = calloc(o->file_num, 1);
    t->wstart = calloc(o->file_num, sizeof *t->wstart);
    size_t bufsz = (size_t)o->block_size * (size_t)o->iodepth;
    size_t poolsz = (size_t)wpool_slots(o, n) * (size_t)o->block_size;
    t->wpool_slots = wpool_slots(o, n);
    t->buf = b->arena + (size_t)id * b->arena_stride;
    t->wpool = t->buf + round4k(bufsz);
    if (!t->fsync_ctr || !t->dirty || !t->wstart || !t->buf || !t->wpool) return -1;
    rng_seed(t->brng, o->seed ^ 0xb0ffe5ull, (uint64_t)id + 0x10000);
    rng_fill(t->brng, t->buf, bufsz);
    rng_fill(t->brng, t->wpool, poolsz);
    t->iv_end = 0;
    return 0;
}

/* The window's opening edge with --devstat after a warmup: the device's counters and the
 * instant that divides our completions between warmup and window, read together. Reading
 * the counters takes microseconds, but a main thread preempted between the reading and the
 * clock (a loaded host) left every completion of that gap on the device's side only: 286
 * requests of 4000 on a fresh-clone test run. So the reading is bracketed by two clock reads
 * and taken again while it took longer than DEVSTAT_EDGE_NS, a preempted reading's retry,
 * and the window opens at the middle of the last reading: the device and the benchmark then
 * disagree by at most the completions of half its span (the last, not the shortest: the
 * workers count nothing until the window opens, so a reading before the last would leave the
 * completions of the later ones on the device's side only). The retries stop once
 * DEVSTAT_EDGE_BUDGET_NS has passed since the first: on a host where every reading is slow
 * (an emulated guest's sysfs, a traced process, many devices) they would otherwise all be
 * taken, and DEVSTAT_EDGE_TRIES readings of a loaded TCG guest opened a 16 s array step's
 * window 2 s after its planned instant, out of lock-step with the other initiators. Returns
 * the window's opening instant. */
#define DEVSTAT_EDGE_NS 200000ull
#define DEVSTAT_EDGE_BUDGET_NS 5000000ull
#define DEVSTAT_EDGE_TRIES 50
static uint64_t devstat_open_window(const options_t *o, devstat_t *ds)
{
    /* read at least once: a stop that came during the warmup still opens the window at a real
     * instant (with none, the window opened at the clock's origin, and an interrupted run
     * reported an elapsed time of the machine's uptime) */
    uint64_t a = 0, z = 0, first = 0;
    for (int i = 0; i < DEVSTAT_EDGE_TRIES && (i == 0 || !atomic_load(&g_stop)); i++) {
        a = now_ns();
        if (i == 0) first = a;
        devstat_sample(o, ds, 0);
        z = now_ns();
        if (z - a <= DEVSTAT_EDGE_NS || z - first >= DEVSTAT_EDGE_BUDGET_NS) break;
    }
    return a + (z - a) / 2;
}

int run_bench(bench_t *b)
{
    const options_t *o = b->o;
    if (!b->nth) b->nth = o->threads;
    int n = b->nth;
    b->blocks_per_file = o->file_size / o->block_size;
    b->total_blocks = b->blocks_per_file * o->file_num;
    b->ival_ns = (uint64_t)(o->report_interval_s * 1e9);
    b->vmap = o->verify_on ? g_vf.map : NULL;
    if (posix_memalign((void **)&b->th, 128, (size_t)n * sizeof *b->th) != 0) return EXIT_INTERNAL;
    memset(b->th, 0, (size_t)n * sizeof *b->th);
    pthread_mutex_init(&b->setup_lock, NULL);
    if (arena_init(b) != 0) { err_msg("out of memory for I/O buffers"); return EXIT_INTERNAL; }
    for (int i = 0; i < n; i++)
        if (thread_init(b, &b->th[i], i) != 0) { err_msg("out of memory for thread %d buffers", i); return EXIT_INTERNAL; }
    if (b->db && db_setup(b) != 0) { err_msg("out of memory for the dbpattern state"); return EXIT_INTERNAL; }
    pthread_barrier_init(&b->barrier, NULL, (unsigned)n + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    int created = 0;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&b->th[i].tid, &attr, thread_main, &b->th[i]) != 0) break;
        created++;
    }
    pthread_attr_destroy(&attr);
    if (created < n) {
        /* cannot start all threads: release the barrier with a stop, join, fail */
        err_msg("--threads %d: could only start %d threads", n, created);
        atomic_store(&b->stop, 1);
        for (int i = created; i < n; i++) pthread_barrier_wait(&b->barrier);
        pthread_barrier_wait(&b->barrier);
        for (int i = 0; i < created; i++) pthread_join(b->th[i].tid, NULL);
        return EXIT_INTERNAL;
    }
    if (o->devstat_n && !b->ds && !(b->ds = calloc(1, sizeof *b->ds))) err_msg("out of memory for --devstat");
    const int warm = o->warmup_s > 0;
    wait_start_at(o);
    b->live = g_live != NULL;
    if (b->live) g_live_run++;
    if (b->ds && !warm) devstat_sample(o, b->ds, 0);   /* no I/O of ours yet: the window starts now */
    uint64_t mono = now_ns();
    double ep = epoch_now();
    uint64_t late_ns = 0;   /* of the run that waited for --start-at; later steps and rounds are not */
    if (g_start.done && !g_start.timed) {
        /* how late the run began, read with its own clock: a main thread a loaded host woke
         * late from --start-at, or preempted on its way here, is late by all of it */
        double late = (ep - g_start.requested) * 1e3;
        g_start.late_ms = late > 0 ? late : 0;
        g_start.timed = 1;
        late_ns = (uint64_t)(g_start.late_ms * 1e6);
    }
    b->t_start = mono;
    /* the window opens after --warmup; on a schedule (--start-at) at its planned instant,
     * --start-at + warmup, however late the run got to the instant (a loaded host's setup or
     * wake-up): a late start shortens the warmup, and one later than the warmup opens the
     * window at once. The other hosts' windows open at that instant: anchored to this host's
     * own late start, a window 1.6 s late missed an array's lock-step by 0.9 s */
    const uint64_t full_warm_ns = (uint64_t)(o->warmup_s * 1e9);
    const uint64_t warm_ns = late_ns < full_warm_ns ? full_warm_ns - late_ns : 0;
    const uint64_t planned = mono + warm_ns;
    if (b->ds && warm && !warm_ns) devstat_sample(o, b->ds, 0);   /* later than the warmup: the window opens now */
    const int late_start = b->ds && warm_ns > 0;
    /* with --devstat after a warmup the window opens when the main thread has read the
     * counters, not at the planned instant: on a busy host it may run late, and I/O between the
     * planned instant and the reading would be in the benchmark's figures but not the device's */
    /* and the window lasts --time from wherever it opened: a deadline fixed at the planned
     * instant let a reading 3.99 s late leave a 4 s window of 10 ms. Except on a schedule
     * (--start-at: an array's lock-step, other hosts' windows and the next step planned
     * around this one): there the window ends at its planned instant, a late one is shorter
     * and says so (window.start_epoch), and the array's common window counts only the overlap */
    const uint64_t run_ns = o->time_s > 0 ? (uint64_t)(o->time_s * 1e9) : 0;
    const int keep_length = late_start && !(o->start_at > 0);
    atomic_store(&b->measure_start, late_start ? UINT64_MAX : planned);
    /* on a schedule the planned end, --start-at + warmup + --time: a start later than the
     * warmup takes its excess off the window (all of it when later than the window's end) */
    const uint64_t over_ns = late_ns > full_warm_ns ? late_ns - full_warm_ns : 0;
    const uint64_t end_ns = mono + warm_ns + (over_ns < run_ns ? run_ns - over_ns : 0);
    atomic_store(&b->deadline, run_ns && !keep_length ? end_ns : UINT64_MAX);
    b->epoch_at_measure_start = ep + (double)warm_ns / 1e9;
    b->epoch_at_start = ep;
    b->late_start = late_start;
    pthread_barrier_wait(&b->barrier);
    if (late_start) {
        struct timespec ts = {(time_t)(planned / 1000000000ull), (long)(planned % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !atomic_load(&g_stop)) {}
        uint64_t now = devstat_open_window(o, b->ds);
        b->epoch_at_measure_start = epoch_now() - (double)(now_ns() - now) / 1e9;
        atomic_store(&b->measure_start, now);
        if (run_ns && keep_length) atomic_store(&b->deadline, now + run_ns);
    }
    if (b->live && b->ival_ns) live_loop(b);
    for (int i = 0; i < n; i++) pthread_join(b->th[i].tid, NULL);
    /* the window ends when the last worker stopped, by the workers' own clock reads: a main
     * thread a loaded host let run late after the join (frozen 2.2 s in a fresh-clone test)
     * stretched a 1 s window of 196 requests to 2.27 s, 86 IOPS where the drive did 196 */
    b->t_end = 0;
    for (int i = 0; i < n; i++)
        if (b->th[i].stop_ns > b->t_end) b->t_end = b->th[i].stop_ns;
    if (!b->t_end) b->t_end = now_ns();
    verify_fold(b);
    if (b->live) live_line(b, 1);
    if (b->ds) devstat_sample(o, b->ds, 1);        /* all our I/O has completed: the window ends now */
    pthread_barrier_destroy(&b->barrier);
    return 0;
}

void bench_free(bench_t *b)
{
    if (!b) return;
    for (int i = 0; b->th && i < b->nth; i++) {
        thread_t *t = &b->th[i];
        free(t->iv); free(t->fsync_ctr); free(t->dirty); free(t->wstart); free(t->xst);
    }
    db_free(b);
    free(b->ds);
    free(b->th);
    free(b->arena);
    free(b);
}

int stop_requested(const bench_t *b)
{
    return atomic_load_explicit(&g_stop, memory_order_relaxed) ||
           atomic_load_explicit(&((bench_t *)b)->stop, memory_order_relaxed);
}
