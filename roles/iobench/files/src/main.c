/* iobench entry point: validate, check the environment, prepare / run / cleanup,
 * write one result, exit with the contract's code (docs/contracts.md section 1). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "iobench.h"

static void on_signal(int sig)
{
    atomic_store(&g_signal, sig);
    atomic_store(&g_stop, 1);
}

/* The target: a directory of test files (files.c) or a raw block device (dev.c). The one
 * place that tells them apart; main() picks the table once. */
typedef struct target_ops {
    const char *flag;                                                  /* "--dir" | "--device" */
    int (*setup)(options_t *o, envinfo_t *env);                        /* exists, environment; exit code */
    int (*prepare)(const options_t *o, envinfo_t *env, prep_result_t *pr);
    int (*open)(const options_t *o, int **fds);
    int (*cleanup)(const options_t *o, report_t *rep);                 /* fills rep->cleaned or rep->zeroed */
} target_ops_t;

static int dir_setup(options_t *o, envinfo_t *env) { return env_check_dir(o, env); }
static int dir_prepare(const options_t *o, envinfo_t *env, prep_result_t *pr)
{
    if (o->command == CMD_RUN && o->direct) {          /* run --prepare --direct: refuse before writing */
        int rc = check_direct_support(o, env, 1);
        if (rc) return rc;
    }
    return do_prepare(o, env, pr);
}
static int dir_cleanup(const options_t *o, report_t *rep) { return do_cleanup(o, &rep->cleaned); }
static int device_prepare(const options_t *o, envinfo_t *env, prep_result_t *pr) { (void)env; return dev_prepare(o, pr); }
static int device_cleanup(const options_t *o, report_t *rep) { return dev_cleanup(o, &rep->zeroed, &rep->zeroed_by); }

static const target_ops_t DIR_TARGET = {"--dir", dir_setup, dir_prepare, open_test_files, dir_cleanup};
static const target_ops_t DEVICE_TARGET = {"--device", dev_setup, device_prepare, dev_open, device_cleanup};

static FILE *g_out;   /* --output, opened before any work so a bad path fails fast */
static int g_out_existed;
static const char *g_out_path;

static int emit(const options_t *o, report_t *r)
{
    FILE *f = g_out ? g_out : stdout;
    if (g_out && ftruncate(fileno(g_out), 0) != 0) { err_msg("--output %s: %s", o->output, strerror(errno)); return -1; }
    if (o->format == FMT_TEXT) write_text(f, r);
    else write_json(f, r);
    if (g_out) {
        g_out = NULL;
        if (fclose(f) != 0) { err_msg("--output %s: %s", o->output, strerror(errno)); return -1; }
    } else if (fflush(f) != 0) {
        return -1;
    }
    return 0;
}

static int real_main(int argc, char **argv);

int main(int argc, char **argv)
{
    int rc = real_main(argc, argv);
    if (g_out) {              /* failed before writing a result: leave no empty file behind */
        fclose(g_out);
        if (!g_out_existed) unlink(g_out_path);
    }
    return rc;
}

static int real_main(int argc, char **argv)
{
    options_t o;
    cli_parse(argc, argv, &o);      /* exits 2 on bad input */
    if (o.check) {                  /* --check: every rule of the command line held; no file touched */
        printf("{\"check\": \"ok\", \"command\": \"%s\"}\n", argv[1]);
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_INTERNAL;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    const target_ops_t *target = o.device ? &DEVICE_TARGET : &DIR_TARGET;
    envinfo_t env;
    int rc = target->setup(&o, &env);
    if (rc) return rc;
    if (o.direct && o.command != CMD_CLEANUP && o.block_size % env.logical_block_size != 0) {
        err_msg("--block-size %llu is not a multiple of the logical block size %u of the device under %s %s (needed by --direct)",
                (unsigned long long)o.block_size, env.logical_block_size, target->flag, o.device ? o.device : o.dir);
        return EXIT_USAGE;
    }
    if (o.direct && o.command == CMD_RUN && o.mode == MODE_DBPATTERN && o.db_log_block % env.logical_block_size != 0) {
        err_msg("--db-log-block %llu is not a multiple of the logical block size %u of the device under --dir %s (needed by --direct)",
                (unsigned long long)o.db_log_block, env.logical_block_size, o.dir);
        return EXIT_USAGE;
    }
    rc = verify_setup(&o, o.command == CMD_PREPARE || o.do_prepare);
    if (rc) return rc;
    if (o.output) {
        g_out_existed = access(o.output, F_OK) == 0;
        int ofd = open(o.output, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);   /* truncated only when writing */
        g_out = ofd >= 0 ? fdopen(ofd, "w") : NULL;
        g_out_path = o.output;
        if (!g_out) { err_msg("--output %s: cannot open for writing: %s", o.output, strerror(errno)); return EXIT_ENV; }
    }
    if (o.live_log && live_open(o.live_log) != 0) {
        err_msg("--live-log %s: cannot open for appending: %s", o.live_log, strerror(errno));
        return EXIT_ENV;
    }
    report_t rep;
    memset(&rep, 0, sizeof rep);
    rep.o = &o;
    rep.env = &env;
    prep_result_t pr;
    memset(&pr, 0, sizeof pr);
    rep.prep = &pr;

    if (o.command == CMD_CLEANUP) {
        rc = target->cleanup(&o, &rep);
        if (rc) return rc;
        rep.cleanup_done = 1;
        rep.exit_code = 0;
        return emit(&o, &rep) ? EXIT_INTERNAL : 0;
    }
    if (o.command == CMD_RUN && o.engine == ENGINE_URING) {
        char msg[512];
        if (uring_probe(msg, sizeof msg) != 0) { err_msg("%s", msg); return EXIT_ENV; }
    }
    if (o.command == CMD_PREPARE || o.do_prepare) {
        rc = target->prepare(&o, &env, &pr);
        if (rc == EXIT_ENV || rc == EXIT_INTERNAL) return rc;
        if (rc) {
            rep.exit_code = rc;
            rep.interrupted = rc == EXIT_INTR;
            rep.signal = atomic_load(&g_signal);
            emit(&o, &rep);
            return rc;
        }
        if (o.command == CMD_PREPARE) {
            rep.exit_code = 0;
            return emit(&o, &rep) ? EXIT_INTERNAL : 0;
        }
    }

    /* run */
    int *fds = NULL;
    rc = target->open(&o, &fds);
    if (rc) return rc;
    if (o.command == CMD_PRECONDITION) {
        static precond_res_t pcr;
        rc = run_precondition(&o, fds, &pcr);
        close_test_files(&o, fds);
        if (rc) return rc;
        rep.precond = &pcr;
        rep.signal = atomic_load(&g_signal);
        rep.interrupted = rep.signal != 0;
        if (pcr.errors) err_msg("I/O errors during precondition (%llu); first: %s", (unsigned long long)pcr.errors, pcr.first_err);
        rep.exit_code = rep.interrupted ? EXIT_INTR : pcr.errors ? EXIT_IOERR : EXIT_OK;
        if (emit(&o, &rep) != 0) return EXIT_INTERNAL;
        return rep.exit_code;
    }
    int log_fd = -1;
    if (o.mode == MODE_DBPATTERN) {
        rc = db_open_log(&o, &log_fd);
        if (rc) { close_test_files(&o, fds); return rc; }
    }
    if (!o.keep_cache) env.page_cache_dropped = drop_cache(&o, fds);
    static search_res_t sr;
    static ss_res_t ssr;
    bench_t *b = NULL;
    if (o.steady_state) {
        rc = run_steady(&o, fds, &ssr);
        if (rc) { close_test_files(&o, fds); return rc; }
        b = ssr.bench;
        rep.steady = &ssr;
        rep.o = b->o;
    } else if (o.search) {
        rc = run_search(&o, fds, &sr);
        if (rc) { close_test_files(&o, fds); return rc; }
        b = sr.bench;
        rep.search = &sr;
        rep.o = b->o;                 /* config describes the reported step (threads / iodepth) */
    } else {
        b = calloc(1, sizeof *b);
        if (!b) return EXIT_INTERNAL;
        b->o = &o;
        b->fds = fds;
        if (o.mode == MODE_DBPATTERN) {
            b->db = db_alloc(&o, log_fd);
            if (!b->db) return EXIT_INTERNAL;
            b->nth = o.threads + 1 + o.db_flushers;
        }
        rc = run_bench(b);
        if (rc) return rc;
        if (b->setup_failed) {
            err_msg("%s", b->setup_err);
            close_test_files(&o, fds);
            return EXIT_ENV;
        }
    }
    uint64_t errs = 0;
    for (int i = 0; i < b->nth; i++) errs += b->th[i].err_total;
    rep.b = b;
    rep.ran = 1;
    rep.signal = atomic_load(&g_signal);
    rep.interrupted = rep.signal != 0;
    /* --verify-pass: the whole working set read back and checked, outside the measured window */
    if (o.verify_on && o.verify_pass && !rep.interrupted && o.mode != MODE_SEQRD && o.mode != MODE_RNDRD) {
        rc = verify_run_pass(&o, fds);
        if (rc) { close_test_files(&o, fds); return rc; }
        errs = g_el.total;
        rep.signal = atomic_load(&g_signal);
        rep.interrupted = rep.signal != 0;
    }
    close_test_files(&o, fds);
    if (log_fd >= 0) close(log_fd);
    b->fds = NULL;
    rep.exit_code = rep.interrupted ? EXIT_INTR : errs || verify_mismatches() ? EXIT_IOERR : EXIT_OK;
    if (verify_mismatches())
        err_msg("--verify: %llu of %llu blocks read back did not hold what was written (corrupt %llu, misplaced %llu, stale %llu)",
                (unsigned long long)verify_mismatches(), (unsigned long long)g_vf.checked,
                (unsigned long long)g_vf.bad[VK_CORRUPT], (unsigned long long)g_vf.bad[VK_MISPLACED],
                (unsigned long long)g_vf.bad[VK_STALE]);
    if (errs && g_el.n) {
        char m[320];
        errlog_message(&g_el.s[0], &o, m, sizeof m);
        err_msg("I/O errors during the run (%llu)%s; first: %s", (unsigned long long)errs,
                g_el.stopped_max ? ", stopped at --max-errors" : "", m);
    }
    if (o.do_cleanup) {
        int crc = target->cleanup(&o, &rep);
        if (!crc) rep.cleanup_done = 1;
        else if (rep.exit_code == 0) rep.exit_code = crc;
    }
    if (emit(&o, &rep) != 0) return EXIT_INTERNAL;
    options_t *so = o.search || o.steady_state ? b->o : NULL;
    bench_free(b);
    free(so);
    return rep.exit_code;
}
