/* iobench - storage benchmark, shared declarations. */
#ifndef IOBENCH_H
#define IOBENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdatomic.h>
#include <pthread.h>
#include <time.h>
#include <sys/types.h>

#define IOBENCH_VERSION "0.1.0"
#define IOBENCH_SCHEMA 1

/* exit codes (docs/contracts.md section 1) */
enum { EXIT_OK = 0, EXIT_INTERNAL = 1, EXIT_USAGE = 2, EXIT_ENV = 3, EXIT_IOERR = 4, EXIT_INTR = 5 };

enum { CMD_NONE = 0, CMD_PREPARE, CMD_RUN, CMD_CLEANUP, CMD_PRECONDITION };
enum { SS_IOPS = 0, SS_MIB, SS_P99 };
enum { MODE_NONE = -1, MODE_SEQWR = 0, MODE_SEQREWR, MODE_SEQRD, MODE_RNDRD, MODE_RNDWR, MODE_RNDRW, MODE_DBPATTERN };
enum { SEARCH_NONE = 0, SEARCH_THREADS, SEARCH_IODEPTH };
enum { ENGINE_SYNC = 0, ENGINE_URING };
enum { FSYNC_FSYNC = 0, FSYNC_FDATASYNC };
enum { FMT_JSON = 0, FMT_TEXT };
enum { OP_READ = 0, OP_WRITE = 1, OP_FSYNC = 2, OP_KINDS = 3 };

#define MAX_THREADS 1024
#define MAX_IODEPTH 4096
#define MAX_FILES 1000000
#define MARKER_NAME ".iobench-marker"
#define MARKER_MAGIC "iobench test directory marker v1"
#define MARKER_VERIFY "verify=iobv-4k"           /* marker line: prepare stamped every 4 KiB (verify.c) */
#define FILE_PREFIX "test_file."
#define DB_LOG_NAME "ib_logfile.iobench"   /* dbpattern redo log; removed by cleanup */
#define SEARCH_MAX_STEPS 32
#define DEVSTAT_MAX 32                     /* --devstat devices */
#define DEVSTAT_NAME 64
#define DEVSTAT_FIELDS 20
#define SS_MAX_ROUNDS 1000                 /* --ss-max-rounds */
#define PRECOND_MAX_PASSES 100             /* precondition --passes */
#define OPT_MAX 96                         /* rows of the option table (cli.c) */

typedef struct options {
    int command;
    int do_prepare, do_cleanup;
    const char *dir;
    uint64_t file_num;
    uint64_t total_size;      /* as requested */
    uint64_t block_size;
    uint64_t file_size;       /* derived: total/file_num rounded down to block */
    int mode;
    double rw_ratio;
    int threads;
    int engine;
    int iodepth;
    int direct;
    int open_sync, open_dsync;
    uint64_t fsync_freq;
    int fsync_all, fsync_end, fsync_mode;
    double time_s;
    uint64_t requests;
    double warmup_s;
    uint64_t seed;
    int seed_given;
    double report_interval_s;
    int keep_cache;
    int format;
    const char *output;
    double start_at;          /* --start-at: Unix time the warmup starts at (0 = at once) */
    const char *live_log;     /* --live-log FILE */
    int check;                /* --check: validate and exit */
    int debug_offsets_hash;   /* hidden: hash the offset sequence per thread */
    uint64_t stream_base;     /* internal: rng stream of thread 0 (search steps use fresh streams) */
    /* --search (latency-bounded maximum) */
    int search;               /* SEARCH_NONE / THREADS / IODEPTH */
    double search_bound_ms;
    int search_max;
    double search_step_time_s;
    double search_min_gain;   /* percent; 0 = never stop for no_gain */
    double search_pct;        /* 99 */
    const char *search_pct_name;   /* "p99" */
    /* --mode dbpattern */
    uint64_t db_reads_per_txn;
    uint64_t db_log_block;
    uint64_t db_log_size;
    int db_flushers;
    double db_flush_rate;     /* pages/s over all flushers, 0 = unthrottled */
    int db_group_max;         /* 0 = unlimited (readers) */
    /* --devstat */
    int devstat_n;
    char devstat[DEVSTAT_MAX][DEVSTAT_NAME];
    double rate_iops;         /* --rate-iops: read+write requests/s over all threads, 0 = unlimited */
    /* --steady-state */
    int steady_state;
    double ss_round_time_s, ss_range_pct, ss_slope_pct;
    int ss_window, ss_max_rounds, ss_metric;
    /* precondition */
    int passes;
    /* --device: a raw block device instead of --dir (dev.c) */
    const char *device;
    uint64_t dev_size;        /* --size, 0 = the whole device */
    uint64_t dev_offset;      /* --offset: where the working set starts on the device */
    uint64_t dev_bytes;       /* the device's size (dev_setup) */
    /* --verify (verify.c, docs/iobench.md "Data verification") */
    int verify;               /* requested */
    int verify_on;            /* in effect (verify_setup: off with a reason when it cannot be sound) */
    int verify_pass;
    uint64_t verify_map_max;  /* bytes of the per-block generation map at most */
    uint64_t max_errors;      /* the workload stops at this many I/O errors in total */
    const char *witness;      /* --witness FILE: acknowledged writes recorded for a power-cut test (witness.c) */
    unsigned char given[OPT_MAX];   /* cli.c: option i of the table was on the command line */
} options_t;

/* ---- size.c ---- */
int parse_size(const char *s, uint64_t *out);          /* 0 ok, -1 bad */
void format_size(uint64_t v, char *buf, size_t n);      /* "16 KiB" */

/* ---- cli.c, cli_rules.c ---- */
enum { G_NONE, G_SEARCH, G_DB, G_DEV, G_SS, G_PRE, G_BDEV, G_N };   /* option groups of the table (cli.c) */
int cli_parse(int argc, char **argv, options_t *o);     /* returns 0 ok or exit code */
void usage(FILE *f);
int option_given(const options_t *o, const char *name);             /* that row was on the command line */
void cli_rules(options_t *o, const char *const group_flag[G_N]);    /* exits 2 when a rule fails */
void write_config_json(FILE *f, const options_t *o);   /* "config": {...} from the option table */
void json_str(FILE *f, const char *s);                 /* json.c: a JSON string */
const char *mode_name(int m);
void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void err_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- hist.c : log-linear histogram ---- */
#define HIST_BITS 6                    /* 64 sub-buckets per power of two */
#define HIST_MAX_EXP 43                /* values clamp below 2^44 ns (~4.9 h) */
#define HIST_N ((HIST_MAX_EXP - HIST_BITS + 2) << HIST_BITS)
#define IVAL_BITS 3                    /* per-interval histograms: 8 per power of two */
#define IVAL_MAX_EXP 39
#define IVAL_N ((IVAL_MAX_EXP - IVAL_BITS + 2) << IVAL_BITS)

static inline uint32_t hist_index_bits(uint64_t v, int bits, int max_exp)
{
    const uint64_t B = 1ull << bits;
    if (v < B) return (uint32_t)v;
    if (v >> (max_exp + 1)) v = (1ull << (max_exp + 1)) - 1;
    int e = 63 - __builtin_clzll(v);
    int shift = e - bits;
    return (uint32_t)(((uint64_t)(shift + 1) << bits) + ((v >> shift) - B));
}
static inline uint32_t hist_index(uint64_t v) { return hist_index_bits(v, HIST_BITS, HIST_MAX_EXP); }
void hist_range_bits(uint32_t idx, int bits, uint64_t *lo, uint64_t *hi);
double hist_value_bits(uint32_t idx, int bits);     /* representative value (bucket midpoint) */
/* nearest-rank percentile from counts; returns 0 if empty */
double hist_percentile_bits(const uint64_t *h, uint32_t n, int bits, uint64_t total, double p);
double hist_percentile32(const uint32_t *h, uint32_t n, int bits, uint64_t total, double p);

/* ---- statistics ---- */
typedef struct opstat {
    uint64_t n, bytes, sum, min, max;
    uint64_t k;         /* shift for numerically stable variance */
    double s1, s2;      /* sum(x-k), sum((x-k)^2) */
    uint64_t hist[HIST_N];
} opstat_t;

static inline void opstat_add(opstat_t *s, uint64_t lat, uint64_t bytes)
{
    if (s->n == 0) { s->k = lat; s->min = lat; s->max = lat; }
    s->n++;
    s->bytes += bytes;
    s->sum += lat;
    if (lat < s->min) s->min = lat;
    if (lat > s->max) s->max = lat;
    double d = (double)lat - (double)s->k;
    s->s1 += d;
    s->s2 += d * d;
    s->hist[hist_index(lat)]++;
}

typedef struct merged {   /* merged over threads */
    uint64_t n, bytes, sum, min, max;
    double mean, m2;      /* m2 = sum of squared deviations */
    uint64_t hist[HIST_N];
} merged_t;
void merged_add(merged_t *m, const opstat_t *s);
double merged_stddev(const merged_t *m);

typedef struct ival {
    uint64_t ops[OP_KINDS];
    uint64_t bytes[OP_KINDS];
    uint64_t lat_sum[OP_KINDS];
    uint64_t lat_max[OP_KINDS];
    uint32_t hist[OP_KINDS][IVAL_N];
} ival_t;

#define ERR_SLOTS 160       /* errno values below this are counted by name */
#define ERR_SHORT_READ ERR_SLOTS
#define ERR_SHORT_WRITE (ERR_SLOTS + 1)
#define ERR_OTHER (ERR_SLOTS + 2)
#define ERR_KINDS (ERR_SLOTS + 3)
const char *err_kind_name(int k);

struct bench;

/* ---- errors described (workload.c record_error) and --verify mismatches (verify.c) ---- */
#define ERR_SAMPLES 16
#define VERIFY_SAMPLES 16
#define VERIFY_CHUNK 4096u          /* a header and a CRC-32C in every 4 KiB written */
#define VERIFY_HDR 32u
#define VERIFY_MAGIC 0x56424f49u    /* "IOBV" */
enum { VK_OK = 0, VK_CORRUPT, VK_MISPLACED, VK_STALE, VK_N };
enum { VOP_READ = 0, VOP_PASS };
typedef struct esample {
    const char *op;            /* read, write, fsync, fdatasync, log write, ..., verify_pass */
    int fi;                    /* file index, -1 = the dbpattern log, -2 = none */
    uint64_t off;
    int err;                   /* errno, 0 = short transfer */
    int kind;                  /* ERR_* */
    int thread;
    uint64_t t;                /* CLOCK_MONOTONIC ns */
} esample_t;
typedef struct vsample {
    int op, kind, fi;
    uint64_t off;              /* the first bad 4 KiB chunk of the block */
    int64_t found_off;         /* misplaced: the offset the chunk's header names, else -1 */
    char expected[64], found[64];
    uint64_t t;
} vsample_t;
typedef struct vctx {
    uint64_t checked, bad[VK_N];
    int ns;
    vsample_t s[VERIFY_SAMPLES];
} vctx_t;
typedef uint32_t (*crc32c_fn)(uint32_t crc, const void *buf, size_t n);
void crc32c_init(void);
uint32_t crc32c(uint32_t crc, const void *buf, size_t n);
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t n);
crc32c_fn crc32c_hw_impl(const char **name);
const char *crc32c_impl_name(void);

/* ---- devstat.c: --devstat ---- */
typedef struct devstat_dev {
    char name[DEVSTAT_NAME];
    int ok, nfields;           /* ok: read at both edges from the same source */
    const char *source;        /* "sysfs" | "diskstats" */
    uint64_t start[DEVSTAT_FIELDS], end[DEVSTAT_FIELDS];
} devstat_dev_t;
typedef struct devstat {
    int n;
    devstat_dev_t d[DEVSTAT_MAX];
    char err[256];             /* first device that could not be read, "" = none */
} devstat_t;
void devstat_sample(const options_t *o, devstat_t *ds, int end);   /* end=0: window start */

typedef struct thread {
    int id;
    pthread_t tid;
    struct bench *b;
    uint64_t rng[4];
    opstat_t st[OP_KINDS];
    ival_t *iv;
    uint64_t iv_cap, iv_used, iv_cur, iv_end;
    uint64_t busy_ns;          /* sum of measured op latencies */
    uint64_t measured;         /* measured read+write ops */
    uint64_t req_limit;        /* read+write ops this thread must do (0 = none) */
    uint64_t seq_start, seq_end, seq_pos;   /* stripe, in blocks */
    uint64_t reads_done, writes_done;
    uint32_t *fsync_ctr;       /* per file */
    uint8_t *dirty;            /* per file */
    uint64_t *wstart;          /* per file: start of the oldest write not yet made durable, 0 = none */
    opstat_t cst;              /* ops.commit: oldest write's start .. end of the fsync that made it durable */
    unsigned char *buf;        /* read buffers, iodepth x block */
    unsigned char *wpool;      /* random write data; each write takes a 4 KiB-aligned slice */
    uint64_t wpool_slots;
    uint64_t brng[4];
    uint64_t errs[ERR_KINDS];
    uint64_t err_total;
    int first_err_kind;
    uint64_t first_err_t;
    char first_err[320];
    uint64_t offsets_hash;
    uint64_t last_done_ns;
    uint64_t stop_ns;          /* when this worker left its loop, its last request completed */
    uint64_t wseq;             /* stamp counter for write buffers */
    int role;                  /* dbpattern: DB_READER / DB_LOGWRITER / DB_FLUSHER */
    opstat_t *xst;             /* dbpattern readers: commit wait latency */
    uint64_t txns;             /* dbpattern readers: committed transactions in the window */
    uint64_t slots_dropped;    /* dbpattern flushers: slots of --db-flush-rate's pace in the window with no write */
    _Atomic uint64_t live[2][3];   /* --live-log: measured reads/writes: count, bytes, latency sum (ns) */
    uint64_t rnd_n, rnd_mul, rnd_add;   /* random block = rng_bounded(rnd_n) x rnd_mul + rnd_add (verify: own blocks) */
    uint64_t ok_after;         /* successful requests after the run's first I/O error */
    int nes;                   /* errors described (es) */
    esample_t es[ERR_SAMPLES];
    vctx_t vc;                 /* --verify: blocks checked, mismatches */
    uint32_t vgen;             /* --verify without a generation map: the generation written */
    int held;                  /* io_uring --verify: a picked request waits for its block's request in flight */
    int held_kind;
    uint64_t held_fi, held_off;
} __attribute__((aligned(128))) thread_t;   /* no false sharing between threads */
enum { DB_NONE = 0, DB_READER, DB_LOGWRITER, DB_FLUSHER };   /* no false sharing between threads */

typedef struct bench {
    options_t *o;
    int *fds;
    uint64_t blocks_per_file, total_blocks;
    uint64_t t_start, ival_ns;
    /* the instant the workers stop issuing: the window's start + --time. With --devstat and a
     * warmup the window opens only when the main thread has read the counters, which a loaded
     * host may delay, so it stays UINT64_MAX until then and workers read it afresh (bench_deadline) */
    _Atomic uint64_t deadline;
    _Atomic uint64_t measure_start;   /* set late by run_bench with --devstat and --warmup (the read instant) */
    double epoch_at_measure_start;
    double epoch_at_start;     /* wall clock when the threads were released (warmup start) */
    int late_start;            /* the window opened at the --devstat reading after the warmup */
    uint64_t t_end;
    atomic_int stop;
    pthread_barrier_t barrier;
    thread_t *th;
    unsigned char *arena;      /* all I/O buffers, see workload.c */
    size_t arena_size, arena_stride;
    int setup_failed;          /* a thread could not set up its engine */
    char setup_err[320];
    pthread_mutex_t setup_lock;
    int nth;                   /* threads started (readers + log writer + flushers for dbpattern) */
    struct dbstate *db;        /* dbpattern shared state (db.c) */
    devstat_t *ds;             /* --devstat readings at the window edges, or NULL */
    const uint64_t *seq_resume; /* steady-state rounds: each thread's sequential position to continue at */
    int live;                  /* --live-log is on: record_op publishes the live counters */
    atomic_int finished;       /* threads that have returned */
    _Atomic uint64_t err_count;   /* I/O errors of this run, all threads (--max-errors) */
    atomic_int err_seen;          /* an I/O error happened: count successes after it */
    atomic_int max_err_stop;      /* stopped at --max-errors */
    uint32_t *vmap;               /* --verify generation map (verify.c), NULL = not tracked */
} bench_t;

/* --start-at: the one wait of the process (the first run_bench: a search's first step, a
 * steady state's first round) */
typedef struct start_state {
    int done, timed;   /* timed: late_ms taken where the run's clock was read (bench_run) */
    double requested, late_ms;
} start_state_t;
extern start_state_t g_start;
int live_open(const char *path);   /* --live-log: open FILE for appending; 0 ok, -1 errno set */

extern atomic_int g_stop;       /* set by SIGINT/SIGTERM handler */
/* --device --offset: the working set is [g_io_base, g_io_base + its size) of the device. The
 * benchmark's own offsets (the block a thread picks, a block header's offset, the generation
 * map) are from the working set's start; only the system calls and the offsets iobench
 * reports (errors, mismatches, witness samples) add g_io_base, so a report names the device's
 * own byte. 0 for --dir (dev.c sets it). */
extern uint64_t g_io_base;
extern atomic_int g_signal;

/* ---- util ---- */
static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
double epoch_now(void);
const char *fs_type_name(long f_type);
int blockdev_sysfs(dev_t dev, const char *rel, char *out, size_t n);
int read_u64_file(const char *path, uint64_t *out);
const char *errno_name(int e);

/* ---- rng.c ---- */
uint64_t splitmix64(uint64_t *x);
void rng_seed(uint64_t s[4], uint64_t seed, uint64_t stream);
static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static inline uint64_t rng_next(uint64_t *s)
{
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}
/* unbiased value in [0, n), Lemire's multiply-shift with rejection */
static inline uint64_t rng_bounded(uint64_t *s, uint64_t n)
{
    uint64_t x = rng_next(s);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = (0 - n) % n;
        while (l < t) {
            x = rng_next(s);
            m = (__uint128_t)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}
void rng_fill(uint64_t *s, void *buf, size_t len);

/* ---- files.c: safety, prepare, cleanup ---- */
typedef struct envinfo {
    char fs_name[32];
    long fs_type;
    uint32_t logical_block_size;
    int lbs_from_sysfs;
    char hostname[256];
    char kernel[128];
    int page_cache_dropped;
} envinfo_t;
typedef struct prep_result {
    int done;
    uint64_t files, bytes;
    double elapsed_s, mib_per_sec;
} prep_result_t;
int env_check_dir(const options_t *o, envinfo_t *env);            /* exists, dir, fs info; exit code */
int check_direct_support(const options_t *o, const envinfo_t *env, int for_prepare);
int do_prepare(const options_t *o, envinfo_t *env, prep_result_t *pr);
int do_cleanup(const options_t *o, uint64_t *removed);
int open_test_files(const options_t *o, int **fds_out);            /* run: checks whole files */
void close_test_files(const options_t *o, int *fds);
int drop_cache(const options_t *o, int *fds);
int check_marker(const char *dir, int required);                   /* 1 present, 0 absent, <0 bad */

/* ---- dev.c: --device ---- */
int dev_setup(options_t *o, envinfo_t *env);        /* block device? size, working set, environment; exit code */
int dev_open(const options_t *o, int **fds_out);    /* O_EXCL | O_DIRECT */
int dev_prepare(const options_t *o, prep_result_t *pr);
int dev_cleanup(const options_t *o, uint64_t *zeroed, const char **zeroed_by);

/* ---- verify.c: --verify, --verify-pass, the process's error log ---- */
typedef struct verify_state {
    int enabled;
    char reason[200];          /* why off, "" = on */
    uint64_t run_id;
    uint32_t *map;             /* per block of --block-size: generation of the last acknowledged write */
    uint64_t map_blocks, map_bytes, bs, bpf;
    int tracked;
    char map_reason[200];
    uint64_t checked, bad[VK_N];
    int ns;
    vsample_t s[VERIFY_SAMPLES];
    int pass_done;
    uint64_t pass_blocks, pass_bytes;
    double pass_elapsed_s;
} verify_state_t;
typedef struct errlog {
    uint64_t total, by_kind[ERR_KINDS], ok_after_first;
    int n;
    esample_t s[ERR_SAMPLES];
    double t_s[ERR_SAMPLES];   /* seconds since the measured window's start */
    int stopped_max;
} errlog_t;
extern verify_state_t g_vf;
extern errlog_t g_el;
int verify_setup(options_t *o, int prepare_here);   /* after the target's setup; exit code */
void verify_stamp(unsigned char *buf, uint64_t len, uint32_t target, uint64_t off, uint32_t gen);
uint32_t verify_chunk_crc(const unsigned char *chunk);   /* the CRC-32C a 4 KiB carries at byte 28 */
int verify_check(vctx_t *vc, int op, const options_t *o, const uint32_t *map, int fi, uint64_t off,
                 const unsigned char *buf, uint64_t len);   /* VK_* of the block */
void verify_fold(bench_t *b);          /* run_bench, after the join: threads' counts into g_vf, g_el */
int verify_run_pass(options_t *o, int *fds);   /* --verify-pass; exit code */
void errlog_message(const esample_t *e, const options_t *o, char *buf, size_t n);
void errlog_add(const char *op, int fi, uint64_t off, int err);   /* an error outside the threads */
uint64_t verify_mismatches(void);
const char *verify_kind_name(int k);
static inline uint64_t verify_blk(const bench_t *b, uint64_t fi, uint64_t off)
{
    return fi * b->blocks_per_file + off / b->o->block_size;
}
/* the generation the next write of block blk carries (only the block's owner thread calls it) */
static inline uint32_t verify_next_gen(thread_t *t, const uint32_t *map, uint64_t blk)
{
    if (!map) return ++t->vgen ? t->vgen : ++t->vgen;
    uint32_t g = (map[blk] & 0x7fffffffu) + 1;
    return g & 0x7fffffffu ? g : 1;
}
/* after the write of blk with generation gen: acknowledged (ok) or failed (the drive may hold
 * any of the block's data since its last acknowledged write: anything well-formed is accepted
 * until the next acknowledged write, which carries a generation above every one tried) */
static inline void verify_written(uint32_t *map, uint64_t blk, uint32_t gen, int ok)
{
    if (map) map[blk] = ok ? gen : gen | 0x80000000u;
}

/* ---- witness.c: --witness, iobench witness-check (docs/durability.md) ---- */
typedef struct witness {
    void *map;                 /* the shared mapping of --witness FILE (NULL = no witness) */
    size_t len;
    struct wentry *ent;        /* one per block of the working set */
    uint64_t blocks, epoch_ms;
    _Atomic uint32_t seq;      /* sequence number of the last write issued */
} witness_t;
extern witness_t g_wit;
int witness_open(const options_t *o, uint64_t blocks, uint64_t bpf);   /* exit code */
void witness_close(void);
void witness_stamp(unsigned char *buf, uint64_t len, uint32_t seq);   /* before verify_stamp (under the CRC) */
void witness_ack(uint64_t blk, uint32_t gen, uint32_t seq);           /* the write is durable */
int witness_check_command(int argc, char **argv);                     /* iobench witness-check; exit code */

/* ---- workload.c ---- */
int run_bench(bench_t *b);
void record_op(thread_t *t, int kind, uint64_t t0, uint64_t t1, uint64_t bytes);
void record_error(thread_t *t, int kind, int fileidx, uint64_t off, const char *what, int err);
void pick_op(thread_t *t, int *kind, uint64_t *fileidx, uint64_t *off);
unsigned char *write_buffer(thread_t *t, uint64_t off);
int fsync_file(thread_t *t, int fileidx, int measure);
int after_write(thread_t *t, int fileidx, uint64_t t0);   /* -1: its fsync failed */
int commit_measured(const options_t *o);    /* ops.commit present: the workload fsyncs its writes */
const char *commit_op(const options_t *o);  /* "commit" | "write" (O_SYNC/O_DSYNC) | NULL */
void fsync_end_all(thread_t *t);

void bench_free(bench_t *b);
int stop_requested(const bench_t *b);
static inline uint64_t bench_deadline(const bench_t *b)
{
    return atomic_load_explicit(&((bench_t *)b)->deadline, memory_order_relaxed);
}

/* ---- db.c: --mode dbpattern ---- */
typedef struct dbresult {
    uint64_t commits, txns_in_commits, log_writes, log_bytes;
    uint64_t slots_dropped;   /* flushers' paced slots with no write (db.c flusher), summed */
} dbresult_t;
int db_open_log(const options_t *o, int *fd_out);     /* create/fill ib_logfile.iobench; exit code */
struct dbstate *db_alloc(const options_t *o, int log_fd);   /* main: b->db, b->nth = readers + 1 + flushers */
int db_setup(bench_t *b);                             /* run_bench, after thread_init: roles, commit slots */
void db_thread(thread_t *t);
void db_result(const bench_t *b, dbresult_t *r);
void db_free(bench_t *b);

/* ---- search.c: --search ---- */
typedef struct search_step {
    int threads, iodepth;
    double iops, p99_us, pct_us, elapsed_s;
    uint64_t ops;
    int complete;
} search_step_t;
typedef struct search_res {
    int nsteps;
    search_step_t steps[SEARCH_MAX_STEPS];
    int best;                  /* index into steps, -1 = none within the bound */
    int reported;              /* step whose bench is reported in ops/total/... */
    const char *stopped;
    bench_t *bench;            /* the reported step's bench (its o is a private copy) */
} search_res_t;
int run_search(options_t *o, int *fds, search_res_t *sr);

/* ---- steady.c: --steady-state, precondition ---- */
typedef struct ss_eval {
    double avg, range, range_limit, slope, slope_excursion, slope_limit;
    int range_ok, slope_ok;
} ss_eval_t;
/* the SNIA PTS rule on y[0..n-1]: 1 = steady (range and fit excursion within their limits) */
int ss_eval(const double *y, int n, double range_pct, double slope_pct, ss_eval_t *ev);
typedef struct ss_round {
    int round;
    double iops, mib_per_sec, lat_p99_us, start_epoch, end_epoch;
} ss_round_t;
typedef struct ss_res {
    int nrounds;
    ss_round_t rounds[SS_MAX_ROUNDS];
    int reached, round;        /* round: 1-based round where the rule first held, -1 = none */
    int evaluated;             /* ev holds the last evaluation */
    ss_eval_t ev;
    int window_first;          /* first round (1-based) of the reported window */
    const char *stopped;       /* steady | max_rounds | interrupted | io_error */
    bench_t *bench;            /* the last --ss-window rounds merged (its o is a private copy) */
} ss_res_t;
int run_steady(options_t *o, int *fds, ss_res_t *sr);
typedef struct precond_res {
    int passes;
    uint64_t bytes, errors;
    double elapsed_s, mib_per_sec;
    double pass_mib_per_sec[PRECOND_MAX_PASSES];
    char first_err[320];
} precond_res_t;
int run_precondition(options_t *o, int *fds, precond_res_t *pr);

/* ---- engines ---- */
void *engine_sync_thread(thread_t *t);
void *engine_uring_thread(thread_t *t);
int uring_probe(char *msg, size_t n);

/* ---- output ---- */
typedef struct report {
    const options_t *o;
    const envinfo_t *env;
    const prep_result_t *prep;
    bench_t *b;
    int ran;
    uint64_t cleaned;
    uint64_t zeroed;           /* --device cleanup: bytes zeroed */
    const char *zeroed_by;     /* --device cleanup: how (dev_cleanup) */
    int cleanup_done;
    int exit_code;
    int interrupted;
    int signal;
    search_res_t *search;      /* --search result, or NULL */
    ss_res_t *steady;          /* --steady-state result, or NULL */
    precond_res_t *precond;    /* precondition result, or NULL */
} report_t;
void write_json(FILE *f, report_t *r);
void write_text(FILE *f, report_t *r);

#endif
