/* Command line: ONE table of options (opts[] below) from which come the parsing, the
 * defaults, --help, the JSON echo of the configuration (config) and `iobench options
 * --format json` (the table itself, for the controller's cross-check).
 * Every check happens before any I/O; failures exit 2 with "iobench: error: ..." naming
 * the flag. A new option is one row here plus the code that uses it. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "iobench.h"

static const char *mode_names[] = {"seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw", "dbpattern"};

const char *mode_name(int m)
{
    if (m < 0 || m > MODE_DBPATTERN) return "none";
    return mode_names[m];
}

/* ---- the table ---- */
enum { T_PATH, T_U64, T_INT, T_DBL, T_SIZE, T_BOOL, T_CHOICE, T_CUSTOM };
typedef struct choice { const char *name; int value; int alias; } choice_t;
struct optdef;
typedef void (*custom_fn)(options_t *o, const struct optdef *d, const char *flag, const char *val);
typedef void (*echo_fn)(FILE *f, const options_t *o);

typedef struct optdef {
    const char *name;     /* module parameter name (plugins/module_utils/plan/options.py) */
    const char *flag;     /* long option without "--" */
    const char *alias;    /* sysbench spelling, or NULL */
    int type;
    size_t off;           /* field in options_t */
    const char *def;      /* default, parsed like a command-line value; NULL = none */
    double min, max;      /* inclusive range of numeric types (when min < max) */
    const choice_t *choices;
    custom_fn parse;      /* T_CUSTOM */
    const char *cfg;      /* key in the JSON config, NULL = not echoed */
    echo_fn echo;         /* custom JSON echo of the value, or NULL */
    int group;
    int hidden;           /* not in --help nor in `iobench options` */
    const char *metavar, *help;
    int min_open;         /* the range excludes min: value > min (rw_ratio, search_bound_ms) */
} optdef_t;

static const choice_t MODE_CH[] = {
    {"seqwr", MODE_SEQWR, 0}, {"seqrewr", MODE_SEQREWR, 0}, {"seqrd", MODE_SEQRD, 0}, {"rndrd", MODE_RNDRD, 0},
    {"rndwr", MODE_RNDWR, 0}, {"rndrw", MODE_RNDRW, 0}, {"dbpattern", MODE_DBPATTERN, 0}, {NULL, 0, 0}};
static const choice_t ENGINE_CH[] = {
    {"sync", ENGINE_SYNC, 0}, {"io_uring", ENGINE_URING, 0}, {"psync", ENGINE_SYNC, 1}, {"uring", ENGINE_URING, 1},
    {NULL, 0, 0}};
static const choice_t FSYNC_CH[] = {{"fsync", FSYNC_FSYNC, 0}, {"fdatasync", FSYNC_FDATASYNC, 0}, {NULL, 0, 0}};
static const choice_t FORMAT_CH[] = {{"json", FMT_JSON, 0}, {"text", FMT_TEXT, 0}, {NULL, 0, 0}};
static const choice_t SEARCH_CH[] = {{"threads", SEARCH_THREADS, 0}, {"iodepth", SEARCH_IODEPTH, 0}, {NULL, 0, 0}};
static const choice_t SSM_CH[] = {{"iops", SS_IOPS, 0}, {"mib_per_sec", SS_MIB, 0}, {"lat_p99_us", SS_P99, 0},
                                  {NULL, 0, 0}};
static const struct { const char *n; double p; } PCTS[] = {
    {"p50", 50}, {"p90", 90}, {"p95", 95}, {"p99", 99}, {"p99.9", 99.9}};

static void parse_open_flags(options_t *o, const optdef_t *d, const char *flag, const char *v);
static void parse_devstat(options_t *o, const optdef_t *d, const char *flag, const char *v);
static void parse_pct(options_t *o, const optdef_t *d, const char *flag, const char *v);
static void echo_open_flags(FILE *f, const options_t *o);
static void echo_devstat(FILE *f, const options_t *o);
static void echo_pct(FILE *f, const options_t *o);

#define OFF(field) offsetof(options_t, field)
static const optdef_t opts[] = {
    {"dir", "dir", NULL, T_PATH, OFF(dir), NULL, 0, 0, NULL, NULL, "dir", NULL, G_NONE, 0,
     "DIR", "test directory (must exist; carries .iobench-marker)", 0},
    {"file_num", "file-num", NULL, T_U64, OFF(file_num), "128", 1, MAX_FILES, NULL, NULL, "file_num", NULL, G_NONE, 0,
     "N", "number of files test_file.0..N-1", 0},
    {"total_size", "total-size", "file-total-size", T_SIZE, OFF(total_size), "2G", 0, 0, NULL, NULL,
     "total_size_requested", NULL, G_NONE, 0, "SIZE", "working set, split evenly over the files", 0},
    {"block_size", "block-size", "file-block-size", T_SIZE, OFF(block_size), "16K", 1, 256 << 20, NULL, NULL,
     "block_size", NULL, G_NONE, 0, "SIZE", "I/O size; sizes take K/M/G/T or KiB/MiB/GiB/TiB", 0},
    {"mode", "mode", "file-test-mode", T_CHOICE, OFF(mode), NULL, 0, 0, MODE_CH, NULL, "mode", NULL, G_NONE, 0,
     "MODE", "workload (required for run)", 0},
    {"rw_ratio", "rw-ratio", "file-rw-ratio", T_DBL, OFF(rw_ratio), "1.5", 0, 1e6, NULL, NULL, "rw_ratio", NULL,
     G_NONE, 0, "R", "reads per write for rndrw (greater than 0)", 1},
    {"threads", "threads", "num-threads", T_INT, OFF(threads), "1", 1, MAX_THREADS, NULL, NULL, "threads", NULL,
     G_NONE, 0, "N", "worker threads", 0},
    {"engine", "engine", NULL, T_CHOICE, OFF(engine), "sync", 0, 0, ENGINE_CH, NULL, "engine", NULL, G_NONE, 0,
     "ENGINE", "I/O engine", 0},
    {"iodepth", "iodepth", NULL, T_INT, OFF(iodepth), "1", 1, MAX_IODEPTH, NULL, NULL, "iodepth", NULL, G_NONE, 0,
     "N", "in-flight requests per thread, io_uring only", 0},
    {"direct", "direct", NULL, T_BOOL, OFF(direct), "off", 0, 0, NULL, NULL, "direct", NULL, G_NONE, 0,
     NULL, "O_DIRECT", 0},
    {"open_flags", "open-flags", "file-extra-flags", T_CUSTOM, 0, NULL, 0, 0, NULL, parse_open_flags, "open_flags",
     echo_open_flags, G_NONE, 0, "LIST", "comma list of sync, dsync, direct", 0},
    {"fsync_freq", "fsync-freq", "file-fsync-freq", T_U64, OFF(fsync_freq), "100", 0, UINT32_MAX, NULL, NULL,
     "fsync_freq", NULL, G_NONE, 0, "N", "fsync a file after every N writes to it per thread (0 = off)", 0},
    {"fsync_all", "fsync-all", "file-fsync-all", T_BOOL, OFF(fsync_all), "off", 0, 0, NULL, NULL, "fsync_all", NULL,
     G_NONE, 0, NULL, "fsync after every write", 0},
    {"fsync_end", "fsync-end", "file-fsync-end", T_BOOL, OFF(fsync_end), "on", 0, 0, NULL, NULL, "fsync_end", NULL,
     G_NONE, 0, NULL, "fsync the written files at the end", 0},
    {"fsync_mode", "fsync-mode", "file-fsync-mode", T_CHOICE, OFF(fsync_mode), "fsync", 0, 0, FSYNC_CH, NULL,
     "fsync_mode", NULL, G_NONE, 0, "MODE", "sync call", 0},
    {"time", "time", "max-time", T_DBL, OFF(time_s), "10", 0, 1e7, NULL, NULL, "time_s", NULL, G_NONE, 0,
     "S", "measured seconds (0 = no limit, needs --requests; 0 when --requests is given)", 0},
    {"requests", "requests", "events", T_U64, OFF(requests), "0", 0, (double)(UINT64_MAX / 2), NULL, NULL,
     "requests", NULL, G_NONE, 0, "N", "total read+write requests over all threads (0 = no limit)", 0},
    {"warmup", "warmup", NULL, T_DBL, OFF(warmup_s), "0", 0, 1e6, NULL, NULL, "warmup_s", NULL, G_NONE, 0,
     "S", "seconds of I/O before the measured window", 0},
    {"seed", "seed", "rand-seed", T_U64, OFF(seed), NULL, 0, (double)UINT64_MAX, NULL, NULL, "seed", NULL, G_NONE, 0,
     "N", "random seed (default: from the clock, echoed in the output)", 0},
    {"report_interval", "report-interval", NULL, T_DBL, OFF(report_interval_s), "1", 0, 1e7, NULL, NULL,
     "report_interval_s", NULL, G_NONE, 0, "S", "interval of the time series (0 = off, else at least 0.01)", 0},
    {"rate_iops", "rate-iops", NULL, T_DBL, OFF(rate_iops), "0", 0, 1e8, NULL, NULL, "rate_iops", NULL, G_NONE, 0,
     "N", "issue at most N read+write requests/s over all threads, evenly paced (sync engine; 0 = unlimited)", 0},
    {"keep_cache", "keep-cache", NULL, T_BOOL, OFF(keep_cache), "off", 0, 0, NULL, NULL, "keep_cache", NULL,
     G_NONE, 0, NULL, "do not drop the test files from the page cache before the run", 0},
    {"prepare", "prepare", NULL, T_BOOL, OFF(do_prepare), "off", 0, 0, NULL, NULL, "prepare", NULL, G_NONE, 0,
     NULL, "run only: create and fill the files first", 0},
    {"cleanup", "cleanup", NULL, T_BOOL, OFF(do_cleanup), "off", 0, 0, NULL, NULL, "cleanup", NULL, G_NONE, 0,
     NULL, "run only: remove the files afterwards", 0},
    {"format", "format", NULL, T_CHOICE, OFF(format), "json", 0, 0, FORMAT_CH, NULL, "format", NULL, G_NONE, 0,
     "FMT", "result format", 0},
    {"output", "output", NULL, T_PATH, OFF(output), NULL, 0, 0, NULL, NULL, NULL, NULL, G_NONE, 0,
     "FILE", "write the result to FILE instead of stdout", 0},
    {"start_at", "start-at", NULL, T_DBL, OFF(start_at), NULL, 0, 1e11, NULL, NULL, NULL, NULL, G_NONE, 0,
     "EPOCH", "run only: after all setup, start the warmup at this Unix time (CLOCK_REALTIME seconds; a past "
     "instant starts at once and the result says how late)", 0},
    {"live_log", "live-log", NULL, T_PATH, OFF(live_log), NULL, 0, 0, NULL, NULL, NULL, NULL, G_NONE, 0,
     "FILE", "run only: append one JSON line of cumulative read/write counts to FILE every --report-interval", 0},
    {"check", "check", NULL, T_BOOL, OFF(check), "off", 0, 0, NULL, NULL, NULL, NULL, G_NONE, 0,
     NULL, "validate the options, touch no file, exit 0 (or 2 with the error)", 0},
    {"verify", "verify", NULL, T_BOOL, OFF(verify), "off", 0, 0, NULL, NULL, "verify", NULL, G_NONE, 0,
     NULL, "stamp every 4 KiB written (offset, file, generation, run id, CRC-32C) and check every block read: "
     "corrupt, misplaced or stale data is counted and described", 0},
    {"verify_pass", "verify-pass", NULL, T_BOOL, OFF(verify_pass), "off", 0, 0, NULL, NULL, "verify_pass", NULL,
     G_NONE, 0, NULL, "with --verify, after a workload that writes: read the whole working set back and check "
     "every block (not part of the measured window)", 0},
    {"verify_map_max", "verify-map-max", NULL, T_SIZE, OFF(verify_map_max), "256M", 0, 0, NULL, NULL,
     "verify_map_max", NULL, G_NONE, 0, "SIZE", "memory for the per-block generation map of --verify (4 bytes per "
     "block); a larger working set is verified without stale (lost write) detection", 0},
    {"max_errors", "max-errors", NULL, T_U64, OFF(max_errors), "64", 1, 1e9, NULL, NULL, "max_errors", NULL,
     G_NONE, 0, "N", "stop the workload at N I/O errors in total (an error does not stop its thread)", 0},
    {"witness", "witness", NULL, T_PATH, OFF(witness), NULL, 0, 0, NULL, NULL, "witness", NULL, G_NONE, 0,
     "FILE", "run only, with --verify: record every write acknowledged as durable (block, generation, time, "
     "sequence number) in FILE, a new file in shared memory, for a power-cut test (iobench witness-check reads "
     "the blocks back); needs --engine sync and --open-flags dsync or sync, or --fsync-all", 0},
    {"debug_offsets_hash", "debug-offsets-hash", NULL, T_BOOL, OFF(debug_offsets_hash), "off", 0, 0, NULL, NULL,
     NULL, NULL, G_NONE, 1, NULL, "hash the offset sequence per thread", 0},
    /* latency-bounded maximum search */
    {"search", "search", NULL, T_CHOICE, OFF(search), NULL, 0, 0, SEARCH_CH, NULL, "search", NULL, G_SEARCH, 0,
     "KNOB", "step the knob 1,2,4,..,max; keep the highest IOPS within the bound", 0},
    {"search_bound_ms", "search-bound-ms", NULL, T_DBL, OFF(search_bound_ms), "50", 0, 3.6e6, NULL, NULL,
     "search_bound_ms", NULL, G_SEARCH, 0, "MS", "latency bound of the percentile (greater than 0)", 1},
    {"search_max", "search-max", NULL, T_INT, OFF(search_max), "64", 1, MAX_IODEPTH, NULL, NULL, "search_max", NULL,
     G_SEARCH, 0, "N", "last value of the knob", 0},
    {"search_step_time", "search-step-time", NULL, T_DBL, OFF(search_step_time_s), "5", 0.1, 3600, NULL, NULL,
     "search_step_time_s", NULL, G_SEARCH, 0, "S", "measured seconds per step", 0},
    {"search_percentile", "search-percentile", NULL, T_CUSTOM, 0, "p99", 0, 0, NULL, parse_pct, "search_percentile",
     echo_pct, G_SEARCH, 0, "P", "p50|p90|p95|p99|p99.9", 0},
    {"search_min_gain", "search-min-gain", NULL, T_DBL, OFF(search_min_gain), "5", 0, 1000, NULL, NULL,
     "search_min_gain_pct", NULL, G_SEARCH, 0, "PCT", "stop (no_gain) after two steps each gaining less (0 = off)", 0},
    /* database pattern */
    {"db_reads_per_txn", "db-reads-per-txn", NULL, T_U64, OFF(db_reads_per_txn), "4", 1, 1000000, NULL, NULL,
     "db_reads_per_txn", NULL, G_DB, 0, "N", "page reads per transaction", 0},
    {"db_log_block", "db-log-block", NULL, T_SIZE, OFF(db_log_block), "4K", 512, 1 << 20, NULL, NULL,
     "db_log_block", NULL, G_DB, 0, "SIZE", "redo log write per group commit (a multiple of 512)", 0},
    {"db_log_size", "db-log-size", NULL, T_SIZE, OFF(db_log_size), "64M", 1 << 20, 64.0 * (1 << 30), NULL, NULL,
     "db_log_size", NULL, G_DB, 0, "SIZE", "size of " DB_LOG_NAME, 0},
    {"db_flushers", "db-flushers", NULL, T_INT, OFF(db_flushers), "1", 0, 64, NULL, NULL, "db_flushers", NULL,
     G_DB, 0, "N", "page flusher threads (0 = none)", 0},
    {"db_flush_rate", "db-flush-rate", NULL, T_DBL, OFF(db_flush_rate), "0", 0, 1e7, NULL, NULL, "db_flush_rate",
     NULL, G_DB, 0, "N", "page writes/s over all flushers (0 = unthrottled)", 0},
    {"db_group_commit_max", "db-group-commit-max", NULL, T_INT, OFF(db_group_max), "0", 0, 1000000, NULL, NULL,
     "db_group_commit_max", NULL, G_DB, 0, "N", "transactions per group commit at most (0 = readers)", 0},
    /* device counters */
    {"devstat", "devstat", NULL, T_CUSTOM, 0, NULL, 0, 0, NULL, parse_devstat, "devstat", echo_devstat, G_DEV, 0,
     "DEV[,DEV...]", "block counters of these devices (names as in /sys/block) at the window's edges", 0},
    /* steady state (SNIA PTS rule) */
    {"steady_state", "steady-state", NULL, T_BOOL, OFF(steady_state), "off", 0, 0, NULL, NULL, "steady_state", NULL,
     G_SS, 0, NULL, "run in rounds until the steady-state rule holds; report the last --ss-window rounds", 0},
    {"ss_round_time", "ss-round-time", NULL, T_DBL, OFF(ss_round_time_s), "10", 0.1, 86400, NULL, NULL,
     "ss_round_time_s", NULL, G_SS, 0, "S", "seconds per round (a multiple of --report-interval; else that defaults to the round)", 0},
    {"ss_window", "ss-window", NULL, T_INT, OFF(ss_window), "5", 2, 100, NULL, NULL, "ss_window", NULL, G_SS, 0,
     "N", "rounds judged together", 0},
    {"ss_range_pct", "ss-range-pct", NULL, T_DBL, OFF(ss_range_pct), "20", 0, 1000, NULL, NULL, "ss_range_pct", NULL,
     G_SS, 0, "PCT", "max - min of the window at most PCT % of its average", 0},
    {"ss_slope_pct", "ss-slope-pct", NULL, T_DBL, OFF(ss_slope_pct), "10", 0, 1000, NULL, NULL, "ss_slope_pct", NULL,
     G_SS, 0, "PCT", "least-squares fit's excursion over the window at most PCT % of its average", 0},
    {"ss_max_rounds", "ss-max-rounds", NULL, T_INT, OFF(ss_max_rounds), "25", 1, SS_MAX_ROUNDS, NULL, NULL,
     "ss_max_rounds", NULL, G_SS, 0, "N", "stop after N rounds (steady state not reached)", 0},
    {"ss_metric", "ss-metric", NULL, T_CHOICE, OFF(ss_metric), "iops", 0, 0, SSM_CH, NULL, "ss_metric", NULL, G_SS, 0,
     "METRIC", "tracked value of a round", 0},
    /* precondition */
    {"passes", "passes", NULL, T_INT, OFF(passes), "1", 1, PRECOND_MAX_PASSES, NULL, NULL, "passes", NULL, G_PRE, 0,
     "N", "precondition: sequential write passes over the working set (block size default 128K)", 0},
    /* raw block device */
    {"device", "device", NULL, T_PATH, OFF(device), NULL, 0, 0, NULL, NULL, "device", NULL, G_BDEV, 0,
     "DEV", "block device (opened O_EXCL and O_DIRECT); the working set starts at --offset", 0},
    {"size", "size", NULL, T_SIZE, OFF(dev_size), "0", 0, 0, NULL, NULL, "size", NULL, G_BDEV, 0,
     "SIZE", "working set on the device: SIZE bytes from --offset (0 = up to the device's end)", 0},
    {"offset", "offset", NULL, T_SIZE, OFF(dev_offset), "0", 0, 0, NULL, NULL, "device_offset", NULL, G_BDEV, 0,
     "OFFSET", "where the working set starts on the device (a multiple of its logical block size)", 0},
};
#define NOPTS (sizeof opts / sizeof opts[0])
_Static_assert(NOPTS <= OPT_MAX, "raise OPT_MAX");

static const char *group_title[] = {
    NULL, "latency-bounded maximum search (modes rndrd, rndwr, rndrw)",
    "database pattern (--mode dbpattern; --threads = page readers)", "device counters",
    "steady state (SNIA PTS rule; run only)", "precondition (iobench precondition)",
    "raw block device target (instead of --dir; DESTROYS the data in the working set)"};

static int group_active(const options_t *o, int g)
{
    switch (g) {
    case G_SEARCH: return o->search != SEARCH_NONE;
    case G_DB: return o->mode == MODE_DBPATTERN;
    case G_DEV: return o->devstat_n > 0;
    case G_SS: return o->steady_state;
    case G_PRE: return o->command == CMD_PRECONDITION;
    case G_BDEV: return o->device != NULL;
    default: return 1;
    }
}

static const optdef_t *find_opt(const char *name)
{
    for (size_t i = 0; i < NOPTS; i++) if (!strcmp(opts[i].name, name)) return &opts[i];
    return NULL;
}

int option_given(const options_t *o, const char *name)
{
    const optdef_t *d = find_opt(name);
    return d && o->given[d - opts];
}

/* ---- value parsers ---- */
static int parse_bool(const char *flag, const char *v)
{
    if (!v) return 1;
    if (!strcasecmp(v, "on") || !strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes")) return 1;
    if (!strcasecmp(v, "off") || !strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no")) return 0;
    die_usage("%s takes on|off, got '%s'", flag, v);
}

static uint64_t parse_u64(const char *flag, const char *v)
{
    char *end;
    if (!v || !*v || *v == '-' || *v == '+') die_usage("%s must be a non-negative integer, got '%s'", flag, v ? v : "");
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end) die_usage("%s must be a non-negative integer, got '%s'", flag, v);
    return x;
}

static double parse_dbl(const char *flag, const char *v)
{
    char *end;
    if (!v || !*v) die_usage("%s needs a number", flag);
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !isfinite(x)) die_usage("%s must be a number, got '%s'", flag, v);
    return x;
}

static uint64_t parse_sz(const char *flag, const char *v)
{
    uint64_t x;
    if (parse_size(v, &x) != 0)
        die_usage("%s: invalid size '%s' (use bytes or a K/M/G/T or KiB/MiB/GiB/TiB suffix)", flag, v);
    return x;
}

static void check_range(const optdef_t *d, const char *flag, double x, const char *v)
{
    if (d->min < d->max && d->min_open && !(x > d->min && x <= d->max))
        die_usage("%s must be greater than %.15g and at most %.15g, got %s", flag, d->min, d->max, v);
    if (d->min < d->max && (x < d->min || x > d->max))
        die_usage("%s must be between %.15g and %.15g, got %s", flag, d->min, d->max, v);
}

static void parse_open_flags(options_t *o, const optdef_t *d, const char *flag, const char *v)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "sync")) o->open_sync = 1;
        else if (!strcmp(tok, "dsync")) o->open_dsync = 1;
        else if (!strcmp(tok, "direct")) o->direct = 1;
        else if (!strcmp(tok, "none")) {}
        else die_usage("%s: unknown flag '%s' (use sync, dsync, direct)", flag, tok);
    }
}

/* --devstat DEV[,DEV...]: kernel names as in /sys/block (sda, nvme0n1, dm-0, sda1) */
static void parse_devstat(options_t *o, const optdef_t *d, const char *flag, const char *v)
{
    o->devstat_n = 0;
    const char *p = v;
    for (;;) {
        size_t l = strcspn(p, ",");
        if (l == 0 || l >= DEVSTAT_NAME || memchr(p, '/', l) || (l <= 2 && p[0] == '.'))
            die_usage("%s: '%.*s' is not a kernel device name as in /sys/block (for example sda, nvme0n1, "
                      "dm-0; not /dev/sda)", flag, (int)(l < 200 ? l : 200), p);
        if (o->devstat_n >= DEVSTAT_MAX) die_usage("%s: at most %d devices", flag, DEVSTAT_MAX);
        memcpy(o->devstat[o->devstat_n], p, l);
        o->devstat[o->devstat_n++][l] = 0;
        if (!p[l]) break;
        p += l + 1;
    }
}

static void parse_pct(options_t *o, const optdef_t *d, const char *flag, const char *v)
{
    for (size_t k = 0; k < sizeof PCTS / sizeof PCTS[0]; k++)
        if (!strcmp(v, PCTS[k].n)) { o->search_pct = PCTS[k].p; o->search_pct_name = PCTS[k].n; return; }
    die_usage("%s: unknown percentile '%s' (use p50, p90, p95, p99, p99.9)", flag, v);
}

static const char *choice_name(const choice_t *c, int value)
{
    for (; c->name; c++) if (!c->alias && c->value == value) return c->name;
    return NULL;
}

static void choice_list(const choice_t *c, char *buf, size_t n, const char *sep)
{
    buf[0] = 0;
    for (int first = 1; c->name; c++) {
        if (c->alias) continue;
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s%s", first ? "" : sep, c->name);
        first = 0;
    }
}

/* one value into its field; the same code parses defaults and the command line */
static void set_value(options_t *o, const optdef_t *d, const char *flag, const char *v)
{
    char *base = (char *)o;
    switch (d->type) {
    case T_PATH:
        if (!*v) die_usage("%s must not be empty", flag);
        *(const char **)(base + d->off) = v;
        break;
    case T_U64: {
        uint64_t x = parse_u64(flag, v);
        check_range(d, flag, (double)x, v);
        *(uint64_t *)(base + d->off) = x;
        break;
    }
    case T_INT: {
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno || *end || !*v) die_usage("%s must be an integer between %.0f and %.0f, got %s", flag, d->min, d->max, v);
        check_range(d, flag, (double)x, v);
        *(int *)(base + d->off) = (int)x;
        break;
    }
    case T_DBL: {
        double x = parse_dbl(flag, v);
        check_range(d, flag, x, v);
        *(double *)(base + d->off) = x;
        break;
    }
    case T_SIZE: {
        uint64_t x = parse_sz(flag, v);
        if (d->min < d->max && ((double)x < d->min || (double)x > d->max)) {
            char lo[32], hi[32];
            format_size((uint64_t)d->min, lo, sizeof lo);
            format_size((uint64_t)d->max, hi, sizeof hi);
            die_usage("%s must be between %s and %s, got %s", flag, lo, hi, v);
        }
        *(uint64_t *)(base + d->off) = x;
        break;
    }
    case T_BOOL:
        *(int *)(base + d->off) = parse_bool(flag, v);
        break;
    case T_CHOICE: {
        for (const choice_t *c = d->choices; c->name; c++)
            if (!strcmp(v, c->name)) { *(int *)(base + d->off) = c->value; return; }
        char list[256];
        choice_list(d->choices, list, sizeof list, ", ");
        die_usage("%s: unknown value '%s' (use %s)", flag, v, list);
    }
    case T_CUSTOM:
        d->parse(o, d, flag, v);
        break;
    }
}

/* ---- --help, from the table ---- */
void usage(FILE *f)
{
    fprintf(f,
"usage: iobench prepare|run|cleanup [options]\n"
"       iobench run --prepare --cleanup [options]   (all three in one call)\n"
"       iobench precondition --dir DIR [--passes N] [--block-size 128K] [options]\n"
"       iobench options [--format json|text]          (this table)\n"
"       iobench witness-check --witness FILE (--dir DIR | --device DEV) [--output FILE]\n");
    int group = -1;
    for (size_t i = 0; i < NOPTS; i++) {
        const optdef_t *d = &opts[i];
        if (d->hidden) continue;
        if (d->group != group) {
            group = d->group;
            fprintf(f, "\n%s%s", group_title[group] ? group_title[group] : "", group_title[group] ? ":\n" : "");
        }
        char left[80], extra[300] = "";
        if (d->type == T_BOOL) snprintf(left, sizeof left, "--%s[=on|off]", d->flag);
        else snprintf(left, sizeof left, "--%s %s", d->flag, d->metavar ? d->metavar : "V");
        if (d->choices) {
            char list[200];
            choice_list(d->choices, list, sizeof list, "|");
            snprintf(extra, sizeof extra, "; %s", list);
        }
        if (d->def) {
            size_t l = strlen(extra);
            snprintf(extra + l, sizeof extra - l, " (default %s)", d->def);
        }
        fprintf(f, "  %-28s %s%s\n", left, d->help, extra);
    }
    fprintf(f, "\n  --help, --version\n");
}

/* ---- the JSON echo of the configuration, from the table ---- */
static void echo_open_flags(FILE *f, const options_t *o)
{
    fprintf(f, "[%s%s%s]", o->open_sync ? "\"sync\"" : "", o->open_sync && o->open_dsync ? ", " : "",
            o->open_dsync ? "\"dsync\"" : "");
}

static void echo_devstat(FILE *f, const options_t *o)
{
    fputc('[', f);
    for (int i = 0; i < o->devstat_n; i++) { if (i) fputs(", ", f); json_str(f, o->devstat[i]); }
    fputc(']', f);
}

static void echo_pct(FILE *f, const options_t *o) { json_str(f, o->search_pct_name); }

static void echo_value(FILE *f, const options_t *o, const optdef_t *d)
{
    const char *base = (const char *)o;
    if (d->echo) { d->echo(f, o); return; }
    switch (d->type) {
    case T_PATH: {
        const char *s = *(const char *const *)(base + d->off);
        if (s) json_str(f, s); else fputs("null", f);
        break;
    }
    case T_U64: case T_SIZE: fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)(base + d->off)); break;
    case T_INT: fprintf(f, "%d", *(const int *)(base + d->off)); break;
    case T_DBL: {
        double x = *(const double *)(base + d->off);
        if (isfinite(x)) fprintf(f, "%.3f", x); else fputs("null", f);
        break;
    }
    case T_BOOL: fputs(*(const int *)(base + d->off) ? "true" : "false", f); break;
    case T_CHOICE: {
        const char *n = choice_name(d->choices, *(const int *)(base + d->off));
        if (n) json_str(f, n); else fputs("null", f);
        break;
    }
    default: fputs("null", f);
    }
}

void write_config_json(FILE *f, const options_t *o)
{
    fprintf(f, "  \"config\": {");
    for (size_t i = 0; i < NOPTS; i++) {
        const optdef_t *d = &opts[i];
        if (!d->cfg || !group_active(o, d->group)) continue;
        fprintf(f, "%s\"%s\": ", i ? ", " : "", d->cfg);
        echo_value(f, o, d);
        if (!strcmp(d->name, "file_num"))     /* derived: what the run actually uses */
            fprintf(f, ", \"file_size\": %llu, \"total_size\": %llu", (unsigned long long)o->file_size,
                    (unsigned long long)(o->file_size * o->file_num));
    }
    fprintf(f, "},\n");
}

/* ---- `iobench options --format json|text` ---- */
static const char *type_name(const optdef_t *d)
{
    static const char *tn[] = {"path", "int", "int", "float", "size", "bool", "str", "str"};
    if (d->type == T_CUSTOM) return d->parse == parse_pct ? "str" : "list";
    return tn[d->type];
}

static void print_default(FILE *f, const optdef_t *d)
{
    if (!d->def) { fputs("null", f); return; }
    switch (d->type) {
    case T_BOOL: fputs(parse_bool("default", d->def) ? "true" : "false", f); break;
    case T_U64: case T_INT: case T_DBL: fputs(d->def, f); break;
    default: json_str(f, d->def);
    }
}

static void options_json(FILE *f)
{
    static const char *gn[] = {NULL, "search", "db", "devstat", "steady_state", "precondition", "device"};
    fprintf(f, "{\"tool\": \"iobench\", \"version\": \"%s\", \"options\": [", IOBENCH_VERSION);
    int first = 1;
    for (size_t i = 0; i < NOPTS; i++) {
        const optdef_t *d = &opts[i];
        if (d->hidden) continue;
        fprintf(f, "%s\n  {\"name\": \"%s\", \"flag\": \"--%s\", \"type\": \"%s\", \"default\": ", first ? "" : ",",
                d->name, d->flag, type_name(d));
        print_default(f, d);
        if (d->choices) {
            fprintf(f, ", \"choices\": [");
            int fc = 1;
            for (const choice_t *c = d->choices; c->name; c++)
                if (!c->alias) { fprintf(f, "%s\"%s\"", fc ? "" : ", ", c->name); fc = 0; }
            fputc(']', f);
        } else if (d->parse == parse_pct) {
            fprintf(f, ", \"choices\": [");
            for (size_t k = 0; k < sizeof PCTS / sizeof PCTS[0]; k++) fprintf(f, "%s\"%s\"", k ? ", " : "", PCTS[k].n);
            fputc(']', f);
        }
        if (d->min < d->max) fprintf(f, ", \"min\": %.17g, \"max\": %.17g, \"min_exclusive\": %s", d->min, d->max,
                                     d->min_open ? "true" : "false");
        fprintf(f, ", \"group\": ");
        if (gn[d->group]) fprintf(f, "\"%s\"", gn[d->group]); else fputs("null", f);
        fprintf(f, ", \"alias\": ");
        if (d->alias) fprintf(f, "\"--%s\"", d->alias); else fputs("null", f);
        fprintf(f, ", \"config_key\": ");
        if (d->cfg) fprintf(f, "\"%s\"", d->cfg); else fputs("null", f);
        fprintf(f, ", \"help\": ");
        json_str(f, d->help);
        fputc('}', f);
        first = 0;
    }
    fprintf(f, "\n]}\n");
}

static void options_command(int argc, char **argv)
{
    int fmt = FMT_JSON;
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--format") && i + 1 < argc) v = argv[++i];
        else if (!strncmp(argv[i], "--format=", 9)) v = argv[i] + 9;
        else die_usage("options: unexpected argument '%s' (only --format json|text)", argv[i]);
        if (!strcmp(v, "json")) fmt = FMT_JSON;
        else if (!strcmp(v, "text")) fmt = FMT_TEXT;
        else die_usage("--format: unknown value '%s' (use json, text)", v);
    }
    if (fmt == FMT_JSON) options_json(stdout);
    else usage(stdout);
    exit(fflush(stdout) == 0 ? 0 : EXIT_INTERNAL);
}

/* ---- parsing ---- */
static const optdef_t *lookup(const char *name)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (!strcmp(opts[i].flag, name) || (opts[i].alias && !strcmp(opts[i].alias, name))) return &opts[i];
    return NULL;
}

int cli_parse(int argc, char **argv, options_t *o)
{
    memset(o, 0, sizeof *o);
    o->mode = MODE_NONE;
    o->search_pct_name = "p99";
    for (size_t i = 0; i < NOPTS; i++)
        if (opts[i].def) set_value(o, &opts[i], opts[i].flag, opts[i].def);

    if (argc < 2) { usage(stderr); die_usage("missing command (prepare, run or cleanup)"); }
    if (!strcmp(argv[1], "options")) options_command(argc, argv);
    if (!strcmp(argv[1], "witness-check")) exit(witness_check_command(argc, argv));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); exit(0); }
        if (!strcmp(argv[i], "--version")) { printf("iobench %s\n", IOBENCH_VERSION); exit(0); }
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "prepare")) o->command = CMD_PREPARE;
    else if (!strcmp(cmd, "run")) o->command = CMD_RUN;
    else if (!strcmp(cmd, "cleanup")) o->command = CMD_CLEANUP;
    else if (!strcmp(cmd, "precondition")) o->command = CMD_PRECONDITION;
    else die_usage("unknown command '%s' (use prepare, run, cleanup, precondition or options)", cmd);

    const char *group_flag[G_N] = {NULL};   /* first option given per group (not the switch itself) */
    static char flags[OPT_MAX][80];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !a[2]) die_usage("unexpected argument '%s'", a);
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a + 2, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nl >= sizeof name) die_usage("unknown option '%s'", a);
        memcpy(name, a + 2, nl);
        name[nl] = 0;
        if (eq) val = eq + 1;
        const optdef_t *d = lookup(name);
        if (!d) die_usage("unknown option '%s' (see iobench --help)", a);
        size_t idx = (size_t)(d - opts);
        char *flag = flags[idx];
        snprintf(flag, sizeof flags[idx], "--%s", d->flag);
        if (d->type != T_BOOL && !val) {
            if (i + 1 >= argc) die_usage("%s needs a value", flag);
            val = argv[++i];
        }
        set_value(o, d, flag, val);
        o->given[idx] = 1;
        if (d->group && !group_flag[d->group] && strcmp(d->name, "search") != 0 && strcmp(d->name, "steady_state") != 0 &&
            strcmp(d->name, "device") != 0)
            group_flag[d->group] = flag;
    }

    cli_rules(o, group_flag);          /* cli_rules.c */
    o->seed_given = option_given(o, "seed");
    if (!o->seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        o->seed = splitmix64(&x) & 0xffffffffull;
    }
    return 0;
}
