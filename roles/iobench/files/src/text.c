/* Human-readable output in the shape of sysbench fileio's report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "summary.h"

static void lat_block(FILE *f, const char *title, const merged_t *m)
{
    fprintf(f, "%s latency (ms):\n", title);
    fprintf(f, "         min: %39.2f\n", m->n ? (double)m->min / 1e6 : 0);
    fprintf(f, "         avg: %39.2f\n", m->n ? m->mean / 1e6 : 0);
    fprintf(f, "         max: %39.2f\n", m->n ? (double)m->max / 1e6 : 0);
    fprintf(f, "         95th percentile: %27.2f\n", op_percentile(m, 95) / 1e6);
    fprintf(f, "         99th percentile: %27.2f\n", op_percentile(m, 99) / 1e6);
    fprintf(f, "         sum: %39.2f\n\n", (double)m->sum / 1e6);
}

void write_text(FILE *f, report_t *r)
{
    const options_t *o = r->o;
    fprintf(f, "iobench %s (sysbench fileio compatible report)\n\n", IOBENCH_VERSION);
    if (r->prep && r->prep->done)
        fprintf(f, "%llu files, %llu bytes written in %.2f seconds (%.2f MiB/sec).\n\n",
                (unsigned long long)r->prep->files, (unsigned long long)r->prep->bytes,
                r->prep->elapsed_s, r->prep->mib_per_sec);
    if (r->precond)
        fprintf(f, "precondition: %d of %d passes, %llu bytes written in %.2f seconds (%.2f MiB/sec).\n\n",
                r->precond->passes, o->passes, (unsigned long long)r->precond->bytes, r->precond->elapsed_s,
                r->precond->mib_per_sec);
    if (r->ran) {
        summary_t s;
        summarize(r->b, &s);
        double el = s.elapsed_s > 0 ? s.elapsed_s : 1e-9;
        char bsz[32], fsz[32];
        format_size(o->block_size, bsz, sizeof bsz);
        format_size(o->file_size, fsz, sizeof fsz);
        fprintf(f, "Running the test with following options:\nNumber of threads: %d\nRandom number generator seed: %llu\n\n",
                o->threads, (unsigned long long)o->seed);
        fprintf(f, "Extra file open flags:%s%s%s%s\n", o->direct ? " directio" : "", o->open_sync ? " sync" : "",
                o->open_dsync ? " dsync" : "", (!o->direct && !o->open_sync && !o->open_dsync) ? " (none)" : "");
        fprintf(f, "%llu files, %s each\n", (unsigned long long)o->file_num, fsz);
        fprintf(f, "Block size %s\n", bsz);
        if (o->mode == MODE_RNDRW) fprintf(f, "Read/Write ratio for combined random IO test: %.2f\n", o->rw_ratio);
        if (o->fsync_freq) fprintf(f, "Periodic FSYNC enabled, calling fsync() each %llu requests.\n", (unsigned long long)o->fsync_freq);
        if (o->fsync_end) fprintf(f, "Calling fsync() at the end of test, Enabled.\n");
        fprintf(f, "Using %s I/O mode (%s engine, iodepth %d)\n", o->engine == ENGINE_URING ? "asynchronous" : "synchronous",
                o->engine == ENGINE_URING ? "io_uring" : "sync", o->iodepth);
        fprintf(f, "Doing %s test\n", mode_name(o->mode));
        fprintf(f, "Page cache %s before the run\n", r->env->page_cache_dropped ? "dropped" : "kept");
        fprintf(f, "Measured window: %.6f .. %.6f (epoch)\n\n", s.start_epoch, s.end_epoch);
        if (s.n_ival) {
            for (uint64_t j = 0; j < s.n_ival; j++) {
                ival_sum_t *v = &s.iv[j];
                double len = o->report_interval_s;
                double tend = (double)(j + 1) * len;
                if (tend > el) { len = el - (double)j * o->report_interval_s; tend = el; }
                if (len <= 0) len = o->report_interval_s;
                fprintf(f, "[ %gs ] reads: %.2f MiB/s writes: %.2f MiB/s fsyncs: %.2f/s latency (ms,99%%): %.3f\n",
                        round(tend * 1000) / 1000, (double)v->bytes[0] / 1048576.0 / len, (double)v->bytes[1] / 1048576.0 / len,
                        (double)v->ops[2] / len,
                        hist_percentile32(v->hist[v->ops[0] ? 0 : 1], IVAL_N, IVAL_BITS,
                                          v->ops[v->ops[0] ? 0 : 1], 99) / 1e6);
            }
            fputc('\n', f);
        }
        fprintf(f, "File operations:\n");
        fprintf(f, "    reads/s:                      %.2f\n", (double)s.op[0].n / el);
        fprintf(f, "    writes/s:                     %.2f\n", (double)s.op[1].n / el);
        fprintf(f, "    fsyncs/s:                     %.2f\n\n", (double)s.op[2].n / el);
        fprintf(f, "Throughput:\n");
        fprintf(f, "    read, MiB/s:                  %.2f\n", (double)s.op[0].bytes / 1048576.0 / el);
        fprintf(f, "    written, MiB/s:               %.2f\n\n", (double)s.op[1].bytes / 1048576.0 / el);
        merged_t all;
        memset(&all, 0, sizeof all);
        /* combined latency like sysbench: merge read/write/fsync */
        for (int k = 0; k < OP_KINDS; k++) {
            const merged_t *m = &s.op[k];
            if (!m->n) continue;
            if (!all.n) { all = *m; continue; }
            double na = (double)all.n, nb = (double)m->n, d = m->mean - all.mean;
            all.mean += d * nb / (na + nb);
            all.m2 += m->m2 + d * d * na * nb / (na + nb);
            if (m->min < all.min) all.min = m->min;
            if (m->max > all.max) all.max = m->max;
            all.n += m->n; all.sum += m->sum; all.bytes += m->bytes;
            for (uint32_t i = 0; i < HIST_N; i++) all.hist[i] += m->hist[i];
        }
        fprintf(f, "General statistics:\n");
        fprintf(f, "    total time:                          %.4fs\n", s.elapsed_s);
        fprintf(f, "    total number of events:              %llu\n\n", (unsigned long long)s.events);
        fprintf(f, "Latency (ms):\n");
        fprintf(f, "         min: %39.2f\n", all.n ? (double)all.min / 1e6 : 0);
        fprintf(f, "         avg: %39.2f\n", all.n ? all.mean / 1e6 : 0);
        fprintf(f, "         max: %39.2f\n", all.n ? (double)all.max / 1e6 : 0);
        fprintf(f, "         95th percentile: %27.2f\n", op_percentile(&all, 95) / 1e6);
        fprintf(f, "         sum: %39.2f\n\n", (double)all.sum / 1e6);
        if (s.op[0].n) lat_block(f, "Read", &s.op[0]);
        if (s.op[1].n) lat_block(f, "Write", &s.op[1]);
        if (s.op[2].n) lat_block(f, "Fsync", &s.op[2]);
        if (s.commit.n) lat_block(f, "Commit (oldest write's start to its fsync's end)", &s.commit);
        fprintf(f, "Threads fairness:\n");
        fprintf(f, "    events (avg/stddev):           %.4f/%.2f\n", s.ev_avg, s.ev_std);
        fprintf(f, "    execution time (avg/stddev):   %.4f/%.2f\n\n", s.time_avg, s.time_std);
        if (r->steady) {
            const ss_res_t *ss = r->steady;
            static const char *mn[] = {"IOPS", "MiB/s", "p99 latency"};
            if (ss->reached)
                fprintf(f, "Steady state (%s): reached at round %d; measured rounds %d..%d\n", mn[o->ss_metric],
                        ss->round, ss->window_first, ss->nrounds);
            else
                fprintf(f, "Steady state (%s): NOT reached in %d rounds (%s); measured rounds %d..%d\n", mn[o->ss_metric],
                        ss->nrounds, ss->stopped, ss->window_first, ss->nrounds);
            for (int i = 0; i < ss->nrounds; i++)
                fprintf(f, "    round %3d: %12.2f IOPS %10.2f MiB/s p99 %.3f ms\n", ss->rounds[i].round, ss->rounds[i].iops,
                        ss->rounds[i].mib_per_sec, ss->rounds[i].lat_p99_us / 1e3);
            fputc('\n', f);
        }
        if (r->search) {
            const search_res_t *sr = r->search;
            fprintf(f, "Latency-bounded search (%s, %s <= %.3f ms): stopped: %s\n",
                    o->search == SEARCH_THREADS ? "threads" : "iodepth", o->search_pct_name, o->search_bound_ms, sr->stopped);
            fprintf(f, "    %8s %8s %12s %12s %12s %9s\n", "threads", "iodepth", "IOPS", "p99 (ms)",
                    o->search_pct_name, "time (s)");
            for (int i = 0; i < sr->nsteps; i++) {
                const search_step_t *st = &sr->steps[i];
                fprintf(f, "    %8d %8d %12.2f %12.3f %12.3f %9.2f%s%s\n", st->threads, st->iodepth, st->iops,
                        st->p99_us / 1e3, st->pct_us / 1e3, st->elapsed_s, i == sr->best ? "  <- best" : "",
                        i == sr->reported && i != sr->best ? "  (reported above)" : "");
            }
            if (sr->best < 0) fprintf(f, "    no step kept %s under %.3f ms\n", o->search_pct_name, o->search_bound_ms);
            fputc('\n', f);
        }
        if (r->b->db) {
            const bench_t *b = r->b;
            dbresult_t dr;
            db_result(b, &dr);
            merged_t *cm = calloc(1, sizeof *cm);
            uint64_t txns = 0;
            for (int i = 0; cm && i < b->nth; i++)
                if (b->th[i].role == DB_READER) { merged_add(cm, b->th[i].xst); txns += b->th[i].txns; }
            fprintf(f, "Database pattern (%d readers, %d flushers, %llu reads per transaction, log block %llu bytes):\n",
                    o->threads, o->db_flushers, (unsigned long long)o->db_reads_per_txn, (unsigned long long)o->db_log_block);
            fprintf(f, "    transactions:                 %llu (%.2f per sec.)\n", (unsigned long long)txns, (double)txns / el);
            fprintf(f, "    group commits (fdatasync):    %llu (%.2f per sec.), %.2f transactions per commit\n",
                    (unsigned long long)dr.commits, (double)dr.commits / el,
                    dr.commits ? (double)dr.txns_in_commits / (double)dr.commits : 0.0);
            fprintf(f, "    log writes:                   %llu (%.2f MiB)\n", (unsigned long long)dr.log_writes,
                    (double)dr.log_bytes / 1048576.0);
            fprintf(f, "    page reads/s:                 %.2f\n", (double)s.op[0].n / el);
            fprintf(f, "    page writes/s:                %.2f", (double)s.op[1].n / el);
            if (o->db_flush_rate > 0)   /* a cap: say when the flushers did not keep it */
                fprintf(f, " (paced at %.2f, %llu slots dropped)", o->db_flush_rate,
                        (unsigned long long)dr.slots_dropped);
            fputs("\n\n", f);
            fprintf(f, "    latency (ms)          p50        p95        p99      p99.9        max\n");
            const merged_t *ms[3] = {cm, &s.op[0], &s.op[1]};
            static const char *ln[3] = {"commit", "page read", "page write"};
            for (int k = 0; k < 3; k++) {
                if (!ms[k]) continue;
                fprintf(f, "    %-12s %10.3f %10.3f %10.3f %10.3f %10.3f\n", ln[k], op_percentile(ms[k], 50) / 1e6,
                        op_percentile(ms[k], 95) / 1e6, op_percentile(ms[k], 99) / 1e6, op_percentile(ms[k], 99.9) / 1e6,
                        ms[k]->n ? (double)ms[k]->max / 1e6 : 0.0);
            }
            fputc('\n', f);
            free(cm);
        }
        if (g_el.total) {
            fprintf(f, "Errors: %llu%s (successful requests after the first: %llu)\n", (unsigned long long)g_el.total,
                    g_el.stopped_max ? ", stopped at --max-errors" : "", (unsigned long long)g_el.ok_after_first);
            for (int k = 0; k < ERR_KINDS; k++)
                if (g_el.by_kind[k]) fprintf(f, "    %s: %llu\n", err_kind_name(k), (unsigned long long)g_el.by_kind[k]);
            for (int i = 0; i < g_el.n; i++) {
                char m[320];
                errlog_message(&g_el.s[i], o, m, sizeof m);
                fprintf(f, "    at %+.3f s: %s\n", g_el.t_s[i], m);
            }
            fputc('\n', f);
        }
        if (g_vf.enabled) {
            fprintf(f, "Verify: %llu blocks checked, corrupt %llu, misplaced %llu, stale %llu (lost writes %s)\n",
                    (unsigned long long)g_vf.checked, (unsigned long long)g_vf.bad[VK_CORRUPT],
                    (unsigned long long)g_vf.bad[VK_MISPLACED], (unsigned long long)g_vf.bad[VK_STALE],
                    g_vf.tracked ? "detected" : g_vf.map_reason);
            if (g_vf.pass_done)
                fprintf(f, "    verify pass: %llu blocks read back in %.3f s\n", (unsigned long long)g_vf.pass_blocks,
                        g_vf.pass_elapsed_s);
            for (int i = 0; i < g_vf.ns; i++) {
                const vsample_t *x = &g_vf.s[i];
                fprintf(f, "    %s at offset %llu of %s", verify_kind_name(x->kind), (unsigned long long)(x->off + g_io_base),
                        o->device ? o->device : "");
                if (!o->device) fprintf(f, "%s/" FILE_PREFIX "%d", o->dir, x->fi);
                fprintf(f, " (%s): expected %s, found %s\n", x->op == VOP_PASS ? "verify pass" : "read", x->expected, x->found);
            }
            fputc('\n', f);
        } else if (o->verify) {
            fprintf(f, "Verify: off (%s)\n\n", g_vf.reason);
        }
        summary_free(&s);
    }
    if (r->interrupted) fprintf(f, "Interrupted by %s.\n", r->signal == 2 ? "SIGINT" : "SIGTERM");
    if (r->cleanup_done) fprintf(f, "Removing test files... %llu files removed.\n", (unsigned long long)r->cleaned);
}
