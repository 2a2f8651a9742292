/* Command line parsing and validation. Every check here happens before any I/O;
 * failures exit 2 with "iobench: error: ..." naming the flag. */
#include <errno.h>
#include <math.h>
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

void usage(FILE *f)
{
    fprintf(f,
"usage: iobench prepare|run|cleanup [options]\n"
"       iobench run --prepare --cleanup [options]   (all three in one call)\n"
"\n"
"  --dir DIR               test directory (must exist; carries .iobench-marker)\n"
"  --file-num N            number of files test_file.0..N-1 (default 128)\n"
"  --total-size SIZE       working set, split evenly over the files (default 2G)\n"
"  --block-size SIZE       I/O size (default 16K); sizes take K/M/G/T or KiB/MiB/GiB/TiB\n"
"  --mode MODE             seqwr|seqrewr|seqrd|rndrd|rndwr|rndrw|dbpattern (required for run)\n"
"  --rw-ratio R            reads per write for rndrw (default 1.5)\n"
"  --threads N             1..1024 (default 1)\n"
"  --engine sync|io_uring  (default sync)\n"
"  --iodepth N             in-flight requests per thread, io_uring only (default 1)\n"
"  --direct                O_DIRECT\n"
"  --open-flags LIST       comma list of sync,dsync,direct\n"
"  --fsync-freq N          fsync a file after every N writes to it per thread (default 100, 0=off)\n"
"  --fsync-all             fsync after every write\n"
"  --fsync-end[=on|off]    fsync written files at the end (default on)\n"
"  --fsync-mode fsync|fdatasync\n"
"  --time S                measured seconds (default 10 unless --requests is given; 0 = no limit)\n"
"  --requests N            total read+write requests over all threads (0 = no limit)\n"
"  --warmup S              seconds of I/O before the measured window (default 0)\n"
"  --seed N                random seed (default: from the clock, echoed in the output)\n"
"  --report-interval S     interval of the time series (default 1, 0 = off)\n"
"  --keep-cache            do not drop the test files from the page cache before the run\n"
"  --format json|text      (default json)\n"
"  --output FILE           write the result to FILE instead of stdout\n"
"\nlatency-bounded maximum search (modes rndrd, rndwr, rndrw):\n"
"  --search threads|iodepth   step the knob 1,2,4,..,max; keep the highest IOPS within the bound\n"
"  --search-bound-ms MS       latency bound of the percentile (default 50)\n"
"  --search-max N             last value of the knob (default 64)\n"
"  --search-step-time S       measured seconds per step (default 5)\n"
"  --search-percentile P      p50|p90|p95|p99|p99.9 (default p99)\n"
"  --search-min-gain PCT      stop (no_gain) after two steps each gaining less (default 5, 0 = off)\n"
"\ndatabase pattern (--mode dbpattern; --threads = page readers):\n"
"  --db-reads-per-txn N       page reads per transaction (default 4)\n"
"  --db-log-block SIZE        redo log write per group commit (default 4K)\n"
"  --db-log-size SIZE         size of " DB_LOG_NAME " (default 64M)\n"
"  --db-flushers N            page flusher threads (default 1, 0 = none)\n"
"  --db-flush-rate N          page writes/s over all flushers (default 0 = unthrottled)\n"
"  --db-group-commit-max N    transactions per group commit at most (default 0 = readers)\n"
"  --help, --version\n");
}

static int parse_bool(const char *flag, const char *v)
{
    if (!v) return 1;
    if (!strcasecmp(v, "on") || !strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes")) return 1;
    if (!strcasecmp(v, "off") || !strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no")) return 0;
    die_usage("%s takes on|off, got '%s'", flag, v);
}

static uint64_t parse_u64(const char *flag, const char *v, uint64_t max)
{
    char *end;
    if (!v || !*v || *v == '-' || *v == '+') die_usage("%s must be a non-negative integer, got '%s'", flag, v ? v : "");
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end) die_usage("%s must be a non-negative integer, got '%s'", flag, v);
    if (x > max) die_usage("%s must be at most %llu, got %s", flag, (unsigned long long)max, v);
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

static void parse_open_flags(options_t *o, const char *v)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "sync")) o->open_sync = 1;
        else if (!strcmp(tok, "dsync")) o->open_dsync = 1;
        else if (!strcmp(tok, "direct")) o->direct = 1;
        else if (!strcmp(tok, "none")) {}
        else die_usage("--open-flags: unknown flag '%s' (use sync, dsync, direct)", tok);
    }
}

/* canonical option names; aliases are sysbench spellings */
static const struct { const char *alias, *name; } aliases[] = {
    {"file-total-size", "total-size"}, {"file-block-size", "block-size"},
    {"file-test-mode", "mode"}, {"file-rw-ratio", "rw-ratio"},
    {"file-fsync-freq", "fsync-freq"}, {"file-fsync-all", "fsync-all"},
    {"file-fsync-end", "fsync-end"}, {"file-fsync-mode", "fsync-mode"},
    {"file-extra-flags", "open-flags"}, {"events", "requests"}, {"rand-seed", "seed"},
    {"num-threads", "threads"}, {"max-time", "time"}, {"file-num", "file-num"},
};

/* options that take a value */
static const char *valued[] = {
    "dir", "file-num", "total-size", "block-size", "mode", "rw-ratio", "threads", "engine",
    "iodepth", "open-flags", "fsync-freq", "fsync-mode", "time", "requests", "warmup", "seed",
    "report-interval", "format", "output",
    "search", "search-bound-ms", "search-max", "search-step-time", "search-percentile", "search-min-gain",
    "db-reads-per-txn", "db-log-block", "db-log-size", "db-flushers", "db-flush-rate", "db-group-commit-max", NULL};
/* boolean options (optionally =on|off) */
static const char *booleans[] = {
    "prepare", "cleanup", "direct", "fsync-all", "fsync-end", "keep-cache",
    "debug-offsets-hash", NULL};

static int in_list(const char *n, const char **l)
{
    for (; *l; l++) if (!strcmp(n, *l)) return 1;
    return 0;
}

int cli_parse(int argc, char **argv, options_t *o)
{
    memset(o, 0, sizeof *o);
    o->file_num = 128;
    o->total_size = 2ull << 30;
    o->block_size = 16384;
    o->mode = MODE_NONE;
    o->rw_ratio = 1.5;
    o->threads = 1;
    o->engine = ENGINE_SYNC;
    o->iodepth = 1;
    o->fsync_freq = 100;
    o->fsync_end = 1;
    o->fsync_mode = FSYNC_FSYNC;
    o->time_s = -1;
    o->report_interval_s = 1;
    o->format = FMT_JSON;
    int have_time = 0, have_iodepth = 0, have_threads = 0, have_search_opt = 0, have_db_opt = 0;
    const char *search_opt = NULL, *db_opt = NULL;
    o->search_bound_ms = 50;
    o->search_max = 64;
    o->search_step_time_s = 5;
    o->search_min_gain = 5;
    o->search_pct = 99;
    o->search_pct_name = "p99";
    o->db_reads_per_txn = 4;
    o->db_log_block = 4096;
    o->db_log_size = 64ull << 20;
    o->db_flushers = 1;

    if (argc < 2) { usage(stderr); die_usage("missing command (prepare, run or cleanup)"); }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); exit(0); }
        if (!strcmp(argv[i], "--version")) { printf("iobench %s\n", IOBENCH_VERSION); exit(0); }
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "prepare")) o->command = CMD_PREPARE;
    else if (!strcmp(cmd, "run")) o->command = CMD_RUN;
    else if (!strcmp(cmd, "cleanup")) o->command = CMD_CLEANUP;
    else die_usage("unknown command '%s' (use prepare, run or cleanup)", cmd);

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
        for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++)
            if (!strcmp(name, aliases[k].alias)) { snprintf(name, sizeof name, "%s", aliases[k].name); break; }
        char flag[80];
        snprintf(flag, sizeof flag, "--%s", name);
        if (in_list(name, valued)) {
            if (!val) {
                if (i + 1 >= argc) die_usage("%s needs a value", flag);
                val = argv[++i];
            }
        } else if (in_list(name, booleans)) {
            /* value only via --flag=on|off */
        } else {
            die_usage("unknown option '%s' (see iobench --help)", a);
        }

        if (!strcmp(name, "dir")) { if (!*val) die_usage("--dir must not be empty"); o->dir = val; }
        else if (!strcmp(name, "file-num")) {
            o->file_num = parse_u64(flag, val, MAX_FILES);
            if (o->file_num == 0) die_usage("--file-num must be at least 1, got 0");
        }
        else if (!strcmp(name, "total-size")) o->total_size = parse_sz(flag, val);
        else if (!strcmp(name, "block-size")) {
            o->block_size = parse_sz(flag, val);
            if (o->block_size == 0) die_usage("--block-size must be greater than 0");
            if (o->block_size > (256ull << 20)) die_usage("--block-size must be at most 256M, got %s", val);
        }
        else if (!strcmp(name, "mode")) {
            o->mode = MODE_NONE;
            for (int m = 0; m <= MODE_DBPATTERN; m++) if (!strcmp(val, mode_names[m])) o->mode = m;
            if (o->mode == MODE_NONE)
                die_usage("--mode: unknown mode '%s' (use seqwr, seqrewr, seqrd, rndrd, rndwr, rndrw, dbpattern)", val);
        }
        else if (!strcmp(name, "rw-ratio")) {
            o->rw_ratio = parse_dbl(flag, val);
            if (!(o->rw_ratio > 0)) die_usage("--rw-ratio must be greater than 0, got %s", val);
        }
        else if (!strcmp(name, "threads")) {
            char *end; errno = 0;
            long t = strtol(val, &end, 10);
            if (errno || *end || !*val || t < 1 || t > MAX_THREADS)
                die_usage("--threads must be between 1 and %d, got %s", MAX_THREADS, val);
            o->threads = (int)t;
            have_threads = 1;
        }
        else if (!strcmp(name, "engine")) {
            if (!strcmp(val, "sync") || !strcmp(val, "psync")) o->engine = ENGINE_SYNC;
            else if (!strcmp(val, "io_uring") || !strcmp(val, "uring")) o->engine = ENGINE_URING;
            else die_usage("--engine: unknown engine '%s' (use sync or io_uring)", val);
        }
        else if (!strcmp(name, "iodepth")) {
            uint64_t d = parse_u64(flag, val, MAX_IODEPTH);
            if (d < 1) die_usage("--iodepth must be between 1 and %d, got %s", MAX_IODEPTH, val);
            o->iodepth = (int)d; have_iodepth = 1;
        }
        else if (!strcmp(name, "open-flags")) parse_open_flags(o, val);
        else if (!strcmp(name, "fsync-freq")) o->fsync_freq = parse_u64(flag, val, UINT32_MAX);
        else if (!strcmp(name, "fsync-mode")) {
            if (!strcmp(val, "fsync")) o->fsync_mode = FSYNC_FSYNC;
            else if (!strcmp(val, "fdatasync")) o->fsync_mode = FSYNC_FDATASYNC;
            else die_usage("--fsync-mode: unknown mode '%s' (use fsync or fdatasync)", val);
        }
        else if (!strcmp(name, "time")) {
            o->time_s = parse_dbl(flag, val);
            if (o->time_s < 0 || o->time_s > 1e7) die_usage("--time must be between 0 and 10000000 seconds, got %s", val);
            have_time = 1;
        }
        else if (!strcmp(name, "requests")) o->requests = parse_u64(flag, val, UINT64_MAX / 2);
        else if (!strcmp(name, "warmup")) {
            o->warmup_s = parse_dbl(flag, val);
            if (o->warmup_s < 0 || o->warmup_s > 1e6) die_usage("--warmup must be between 0 and 1000000 seconds, got %s", val);
        }
        else if (!strcmp(name, "seed")) { o->seed = parse_u64(flag, val, UINT64_MAX); o->seed_given = 1; }
        else if (!strcmp(name, "report-interval")) {
            o->report_interval_s = parse_dbl(flag, val);
            if (o->report_interval_s < 0 || (o->report_interval_s > 0 && o->report_interval_s < 0.01))
                die_usage("--report-interval must be 0 (off) or at least 0.01 seconds, got %s", val);
        }
        else if (!strcmp(name, "format")) {
            if (!strcmp(val, "json")) o->format = FMT_JSON;
            else if (!strcmp(val, "text")) o->format = FMT_TEXT;
            else die_usage("--format: unknown format '%s' (use json or text)", val);
        }
        else if (!strcmp(name, "output")) { if (!*val) die_usage("--output must not be empty"); o->output = val; }
        else if (!strcmp(name, "search")) {
            if (!strcmp(val, "threads")) o->search = SEARCH_THREADS;
            else if (!strcmp(val, "iodepth")) o->search = SEARCH_IODEPTH;
            else die_usage("--search: unknown knob '%s' (use threads or iodepth)", val);
        }
        else if (!strncmp(name, "search-", 7)) {
            have_search_opt = 1;
            search_opt = !strcmp(name, "search-bound-ms") ? "--search-bound-ms" : !strcmp(name, "search-max") ? "--search-max"
                       : !strcmp(name, "search-step-time") ? "--search-step-time"
                       : !strcmp(name, "search-min-gain") ? "--search-min-gain" : "--search-percentile";
            if (!strcmp(name, "search-bound-ms")) {
                o->search_bound_ms = parse_dbl(flag, val);
                if (!(o->search_bound_ms > 0) || o->search_bound_ms > 3.6e6)
                    die_usage("--search-bound-ms must be greater than 0 (and at most 3600000), got %s", val);
            } else if (!strcmp(name, "search-max")) {
                o->search_max = (int)parse_u64(flag, val, MAX_IODEPTH);
                if (o->search_max < 1) die_usage("--search-max must be at least 1, got %s", val);
            } else if (!strcmp(name, "search-min-gain")) {
                o->search_min_gain = parse_dbl(flag, val);
                if (o->search_min_gain < 0 || o->search_min_gain > 1000)
                    die_usage("--search-min-gain must be between 0 (off) and 1000 percent, got %s", val);
            } else if (!strcmp(name, "search-step-time")) {
                o->search_step_time_s = parse_dbl(flag, val);
                if (!(o->search_step_time_s >= 0.1) || o->search_step_time_s > 3600)
                    die_usage("--search-step-time must be between 0.1 and 3600 seconds, got %s", val);
            } else {
                static const struct { const char *n; double p; } pcts[] = {
                    {"p50", 50}, {"p90", 90}, {"p95", 95}, {"p99", 99}, {"p99.9", 99.9}};
                int ok = 0;
                for (size_t k = 0; k < sizeof pcts / sizeof pcts[0]; k++)
                    if (!strcmp(val, pcts[k].n)) { o->search_pct = pcts[k].p; o->search_pct_name = pcts[k].n; ok = 1; }
                if (!ok) die_usage("--search-percentile: unknown percentile '%s' (use p50, p90, p95, p99, p99.9)", val);
            }
        }
        else if (!strncmp(name, "db-", 3)) {
            have_db_opt = 1;
            static char dbflag[80];
            snprintf(dbflag, sizeof dbflag, "%s", flag);
            db_opt = dbflag;
            if (!strcmp(name, "db-reads-per-txn")) {
                o->db_reads_per_txn = parse_u64(flag, val, 1000000);
                if (o->db_reads_per_txn < 1) die_usage("--db-reads-per-txn must be between 1 and 1000000, got %s", val);
            } else if (!strcmp(name, "db-log-block")) {
                o->db_log_block = parse_sz(flag, val);
                if (o->db_log_block < 512 || o->db_log_block % 512 || o->db_log_block > (1u << 20))
                    die_usage("--db-log-block must be a multiple of 512 bytes between 512 and 1M, got %s", val);
            } else if (!strcmp(name, "db-log-size")) {
                o->db_log_size = parse_sz(flag, val);
                if (o->db_log_size < (1u << 20) || o->db_log_size > (64ull << 30))
                    die_usage("--db-log-size must be between 1M and 64G, got %s", val);
            } else if (!strcmp(name, "db-flushers")) {
                o->db_flushers = (int)parse_u64(flag, val, 64);
            } else if (!strcmp(name, "db-flush-rate")) {
                o->db_flush_rate = parse_dbl(flag, val);
                if (o->db_flush_rate < 0 || o->db_flush_rate > 1e7)
                    die_usage("--db-flush-rate must be between 0 (unthrottled) and 10000000 pages/s, got %s", val);
            } else {
                o->db_group_max = (int)parse_u64(flag, val, 1000000);
            }
        }
        else if (!strcmp(name, "prepare")) o->do_prepare = parse_bool(flag, val);
        else if (!strcmp(name, "cleanup")) o->do_cleanup = parse_bool(flag, val);
        else if (!strcmp(name, "direct")) o->direct = parse_bool(flag, val);
        else if (!strcmp(name, "fsync-all")) o->fsync_all = parse_bool(flag, val);
        else if (!strcmp(name, "fsync-end")) o->fsync_end = parse_bool(flag, val);
        else if (!strcmp(name, "keep-cache")) o->keep_cache = parse_bool(flag, val);
        else if (!strcmp(name, "debug-offsets-hash")) o->debug_offsets_hash = parse_bool(flag, val);
    }

    /* cross-checks */
    if (!o->dir) die_usage("--dir is required");
    if (o->command != CMD_RUN && (o->do_prepare || o->do_cleanup))
        die_usage("--prepare/--cleanup are only valid with the run command");
    if (o->command == CMD_RUN && o->mode == MODE_NONE)
        die_usage("--mode is required for run (seqwr, seqrewr, seqrd, rndrd, rndwr, rndrw, dbpattern)");
    if (o->file_num * o->block_size / o->block_size != o->file_num || o->total_size < o->file_num * o->block_size)
        die_usage("--total-size (%llu bytes) must be at least --file-num x --block-size (%llu x %llu)",
                  (unsigned long long)o->total_size, (unsigned long long)o->file_num,
                  (unsigned long long)o->block_size);
    o->file_size = o->total_size / o->file_num / o->block_size * o->block_size;
    if (o->direct && o->block_size % 512 != 0)
        die_usage("--block-size %llu is not a multiple of the 512-byte sector size required by --direct",
                  (unsigned long long)o->block_size);
    if (o->engine == ENGINE_SYNC && have_iodepth && o->iodepth > 1)
        die_usage("--iodepth %d needs --engine io_uring (the sync engine has one request in flight per thread)", o->iodepth);
    if (o->search) {
        if (o->command != CMD_RUN) die_usage("--search is only valid with the run command");
        if (o->mode != MODE_RNDRD && o->mode != MODE_RNDWR && o->mode != MODE_RNDRW)
            die_usage("--search needs --mode rndrd, rndwr or rndrw, got %s", mode_name(o->mode));
        if (o->requests) die_usage("--requests cannot be combined with --search (each step runs --search-step-time seconds)");
        if (have_time) die_usage("--time cannot be combined with --search (use --search-step-time, seconds per step)");
        if (o->search == SEARCH_IODEPTH && o->engine != ENGINE_URING)
            die_usage("--search iodepth needs --engine io_uring (the sync engine has one request in flight per thread)");
        if (o->search == SEARCH_THREADS && have_threads && o->threads != 1)
            die_usage("--threads %d cannot be combined with --search threads (the search sets the thread count)", o->threads);
        if (o->search == SEARCH_IODEPTH && have_iodepth && o->iodepth != 1)
            die_usage("--iodepth %d cannot be combined with --search iodepth (the search sets the depth)", o->iodepth);
        if (o->search == SEARCH_THREADS && o->search_max > MAX_THREADS)
            die_usage("--search-max must be between 1 and %d for --search threads, got %d", MAX_THREADS, o->search_max);
        o->time_s = o->search_step_time_s;
        have_time = 1;
    } else if (have_search_opt) {
        die_usage("%s needs --search threads|iodepth", search_opt);
    }
    if (o->mode == MODE_DBPATTERN) {
        if (o->requests) die_usage("--requests cannot be combined with --mode dbpattern (use --time)");
        if (o->engine != ENGINE_SYNC) die_usage("--engine io_uring is not supported by --mode dbpattern (use --engine sync)");
        if (o->db_log_block > o->block_size)
            die_usage("--db-log-block %llu must not be larger than --block-size %llu (the page size)",
                      (unsigned long long)o->db_log_block, (unsigned long long)o->block_size);
        if (o->db_log_size < 16 * o->db_log_block)
            die_usage("--db-log-size must be at least 16 x --db-log-block");
        if (o->db_log_size % o->db_log_block)
            die_usage("--db-log-size must be a multiple of --db-log-block (%llu)", (unsigned long long)o->db_log_block);
        if (have_time && o->time_s == 0) die_usage("--time 0 is not valid with --mode dbpattern (no limit needs --requests, which dbpattern has not)");
    } else if (have_db_opt) {
        die_usage("%s needs --mode dbpattern", db_opt);
    }
    if (!have_time) o->time_s = o->requests ? 0 : 10;
    if (o->time_s == 0 && o->requests == 0 && o->command == CMD_RUN)
        die_usage("--time 0 needs --requests (the run would never end)");
    if (o->command == CMD_RUN && o->mode <= MODE_SEQRD) {
        uint64_t blocks = o->file_size / o->block_size * o->file_num;
        if (blocks < (uint64_t)o->threads)
            die_usage("--threads %d is more than the %llu blocks of the working set (each thread needs its own stripe)",
                      o->threads, (unsigned long long)blocks);
    }
    if (!o->seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        o->seed = splitmix64(&x) & 0xffffffffull;
    }
    return 0;
}
