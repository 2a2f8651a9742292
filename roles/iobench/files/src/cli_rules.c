/* The rules between options of `iobench run|prepare|cleanup|precondition` (cli_parse calls
 * them once every value has passed its row of the option table in cli.c). They are what
 * `--check` checks beyond single values; plugins/module_utils/plan/options.py
 * `rule_errors` is their twin on the controller, held to them by
 * tests/unit/plugins/module_utils/plan/test_option_space.py. Each failure exits 2 naming the flag. */
#include <math.h>
#include <string.h>
#include "iobench.h"

void cli_rules(options_t *o, const char *const group_flag[G_N])
{
    if (o->dir && o->device) die_usage("--dir and --device exclude each other (a directory or a block device)");
    if (!o->dir && !o->device) die_usage("--dir is required (or --device for a raw block device)");
    if (!o->device && group_flag[G_BDEV]) die_usage("%s needs --device", group_flag[G_BDEV]);
    if (o->device) {
        if (option_given(o, "total_size")) die_usage("--total-size is not used with --device (use --size, default the whole device)");
        if (option_given(o, "file_num")) die_usage("--file-num is not used with --device (the device is the one file)");
        if (o->mode == MODE_DBPATTERN) die_usage("--device cannot be used with --mode dbpattern (its redo log needs --dir)");
        if (o->dev_size % 512) die_usage("--size must be a multiple of 512 bytes, got %llu", (unsigned long long)o->dev_size);
        if (o->dev_offset % 512)
            die_usage("--offset must be a multiple of 512 bytes, got %llu", (unsigned long long)o->dev_offset);
        o->direct = 1;              /* a block device is always measured with O_DIRECT */
        o->file_num = 1;                 /* sizes: dev_setup, once the device is known */
    }
    if (o->command != CMD_RUN && (o->do_prepare || o->do_cleanup))
        die_usage("--prepare/--cleanup are only valid with the run command");
    if (o->command == CMD_RUN && o->mode == MODE_NONE)
        die_usage("--mode is required for run (seqwr, seqrewr, seqrd, rndrd, rndwr, rndrw, dbpattern)");
    if (o->report_interval_s > 0 && o->report_interval_s < 0.01)
        die_usage("--report-interval must be 0 (off) or at least 0.01 seconds, got %g", o->report_interval_s);
    if (o->command == CMD_PRECONDITION) {
        if (!option_given(o, "block_size")) o->block_size = 128 << 10;
        if (option_given(o, "time") || o->requests) die_usage("%s is not used by precondition (a pass writes the whole working set once)",
                                                      option_given(o, "time") ? "--time" : "--requests");
        if (o->search || o->steady_state) die_usage("%s is only valid with the run command", o->search ? "--search" : "--steady-state");
        if (o->mode == MODE_DBPATTERN) die_usage("--mode dbpattern is not valid with precondition (it writes sequentially)");
    } else if (group_flag[G_PRE]) {
        die_usage("%s is only valid with the precondition command", group_flag[G_PRE]);
    }
    if (!o->device && (o->file_num * o->block_size / o->block_size != o->file_num ||
                       o->total_size < o->file_num * o->block_size))
        die_usage("--total-size (%llu bytes) must be at least --file-num x --block-size (%llu x %llu)",
                  (unsigned long long)o->total_size, (unsigned long long)o->file_num,
                  (unsigned long long)o->block_size);
    o->file_size = o->total_size / o->file_num / o->block_size * o->block_size;
    if (o->direct && o->block_size % 512 != 0)
        die_usage("--block-size %llu is not a multiple of the 512-byte sector size required by --direct",
                  (unsigned long long)o->block_size);
    if (o->engine == ENGINE_SYNC && option_given(o, "iodepth") && o->iodepth > 1)
        die_usage("--iodepth %d needs --engine io_uring (the sync engine has one request in flight per thread)", o->iodepth);
    if (o->rate_iops > 0 && (o->engine != ENGINE_SYNC || o->mode == MODE_DBPATTERN || o->search))
        die_usage("--rate-iops needs --engine sync and is not valid with --mode dbpattern or --search");
    int have_time = option_given(o, "time");
    if (o->search) {
        if (o->command != CMD_RUN) die_usage("--search is only valid with the run command");
        if (o->mode != MODE_RNDRD && o->mode != MODE_RNDWR && o->mode != MODE_RNDRW)
            die_usage("--search needs --mode rndrd, rndwr or rndrw, got %s", mode_name(o->mode));
        if (o->requests) die_usage("--requests cannot be combined with --search (each step runs --search-step-time seconds)");
        if (have_time) die_usage("--time cannot be combined with --search (use --search-step-time, seconds per step)");
        if (o->search == SEARCH_IODEPTH && o->engine != ENGINE_URING)
            die_usage("--search iodepth needs --engine io_uring (the sync engine has one request in flight per thread)");
        if (o->search == SEARCH_THREADS && option_given(o, "threads") && o->threads != 1)
            die_usage("--threads %d cannot be combined with --search threads (the search sets the thread count)", o->threads);
        if (o->search == SEARCH_IODEPTH && option_given(o, "iodepth") && o->iodepth != 1)
            die_usage("--iodepth %d cannot be combined with --search iodepth (the search sets the depth)", o->iodepth);
        if (o->search == SEARCH_THREADS && o->search_max > MAX_THREADS)
            die_usage("--search-max must be between 1 and %d for --search threads, got %d", MAX_THREADS, o->search_max);
        o->time_s = o->search_step_time_s;
        have_time = 1;
    } else if (group_flag[G_SEARCH]) {
        die_usage("%s needs --search threads|iodepth", group_flag[G_SEARCH]);
    }
    if (o->mode == MODE_DBPATTERN) {
        if (o->requests) die_usage("--requests cannot be combined with --mode dbpattern (use --time)");
        if (o->engine != ENGINE_SYNC) die_usage("--engine io_uring is not supported by --mode dbpattern (use --engine sync)");
        if (o->db_log_block % 512)
            die_usage("--db-log-block must be a multiple of 512 bytes between 512 and 1M, got %llu",
                      (unsigned long long)o->db_log_block);
        if (o->db_log_block > o->block_size)
            die_usage("--db-log-block %llu must not be larger than --block-size %llu (the page size)",
                      (unsigned long long)o->db_log_block, (unsigned long long)o->block_size);
        if (o->db_log_size < 16 * o->db_log_block)
            die_usage("--db-log-size must be at least 16 x --db-log-block");
        if (o->db_log_size % o->db_log_block)
            die_usage("--db-log-size must be a multiple of --db-log-block (%llu)", (unsigned long long)o->db_log_block);
        if (have_time && o->time_s == 0) die_usage("--time 0 is not valid with --mode dbpattern (no limit needs --requests, which dbpattern has not)");
    } else if (group_flag[G_DB]) {
        die_usage("%s needs --mode dbpattern", group_flag[G_DB]);
    }
    if (o->steady_state) {
        if (o->command != CMD_RUN) die_usage("--steady-state is only valid with the run command");
        if (o->search) die_usage("--steady-state cannot be combined with --search");
        if (o->mode == MODE_DBPATTERN) die_usage("--steady-state is not supported by --mode dbpattern");
        if (o->requests) die_usage("--requests cannot be combined with --steady-state (rounds run --ss-round-time seconds)");
        if (have_time) die_usage("--time cannot be combined with --steady-state (use --ss-round-time and --ss-max-rounds)");
        if (o->ss_max_rounds < o->ss_window)
            die_usage("--ss-max-rounds %d must be at least --ss-window %d", o->ss_max_rounds, o->ss_window);
        if (o->report_interval_s > 0) {
            double q = o->ss_round_time_s / o->report_interval_s;
            if (fabs(q - round(q)) > 1e-6 * q && !option_given(o, "report_interval"))
                o->report_interval_s = o->ss_round_time_s;     /* default 1 s does not divide the round */
            else if (fabs(q - round(q)) > 1e-6 * q)
                die_usage("--ss-round-time %g must be a multiple of --report-interval %g (or use --report-interval 0)",
                          o->ss_round_time_s, o->report_interval_s);
        }
        o->time_s = o->ss_round_time_s;
        have_time = 1;
    } else if (group_flag[G_SS]) {
        die_usage("%s needs --steady-state", group_flag[G_SS]);
    }
    if (o->command != CMD_RUN && (option_given(o, "start_at") || o->live_log))
        die_usage("%s is only valid with the run command", option_given(o, "start_at") ? "--start-at" : "--live-log");
    if (o->live_log && !(o->report_interval_s > 0))
        die_usage("--live-log needs --report-interval greater than 0 (a line per interval)");
    if (o->witness) {
        if (o->command != CMD_RUN) die_usage("--witness is only valid with the run command");
        if (!o->verify) die_usage("--witness needs --verify (the witness records the generations --verify stamps)");
        if (o->mode == MODE_SEQRD || o->mode == MODE_RNDRD || o->mode == MODE_DBPATTERN)
            die_usage("--witness needs a mode that writes blocks of its own (seqwr, seqrewr, rndwr, rndrw), got %s",
                      mode_name(o->mode));
        if (o->engine != ENGINE_SYNC) die_usage("--witness needs --engine sync");
        if (o->search || o->steady_state) die_usage("--witness cannot be combined with %s", o->search ? "--search" : "--steady-state");
        if (!o->open_sync && !o->open_dsync && !o->fsync_all)
            die_usage("--witness: every write must be durable when it is acknowledged: add --open-flags dsync "
                      "(O_DSYNC; FUA on a raw device that offers it) or sync, or --fsync-all");
    }
    if (!have_time) o->time_s = o->requests ? 0 : 10;
    if (o->command == CMD_PRECONDITION) o->time_s = 0;
    if (o->time_s == 0 && o->requests == 0 && o->command == CMD_RUN)
        die_usage("--time 0 needs --requests (the run would never end)");
    if (((o->command == CMD_RUN && o->mode <= MODE_SEQRD) || o->command == CMD_PRECONDITION) && !o->device) {
        uint64_t blocks = o->file_size / o->block_size * o->file_num;
        if (blocks < (uint64_t)o->threads)
            die_usage("--threads %d is more than the %llu blocks of the working set (each thread needs its own stripe)",
                      o->threads, (unsigned long long)blocks);
    }
}
