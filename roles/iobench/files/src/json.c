/* JSON output, schema_version 1 (docs/iobench-json.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "summary.h"

void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

#define jstr json_str

static void jnum(FILE *f, double v, int prec)
{
    if (!isfinite(v)) { fputs("null", f); return; }
    fprintf(f, "%.*f", prec, v);
}

/* window.devstat / window.devstat_error (--devstat): raw counters at both edges */
static void write_devstat(FILE *f, const devstat_t *ds)
{
    fprintf(f, ",\n             \"devstat\": {");
    int first = 1;
    for (int i = 0; ds && i < ds->n; i++) {
        const devstat_dev_t *d = &ds->d[i];
        if (!d->ok) continue;
        fprintf(f, "%s", first ? "" : ", ");
        jstr(f, d->name);
        for (int e = 0; e < 2; e++) {
            const uint64_t *v = e ? d->end : d->start;
            fprintf(f, e ? "], \"end\": [" : ": {\"start\": [");
            for (int k = 0; k < d->nfields; k++) fprintf(f, "%s%llu", k ? ", " : "", (unsigned long long)v[k]);
        }
        fprintf(f, "], \"source\": \"%s\"}", d->source);
        first = 0;
    }
    fprintf(f, "}, \"devstat_error\": ");
    if (!ds) fputs("\"out of memory\"", f);
    else if (ds->err[0]) jstr(f, ds->err);
    else fputs("null", f);
}

static const struct { const char *k; double p; } DBP[] = {
    {"p50", 50}, {"p90", 90}, {"p95", 95}, {"p99", 99}, {"p99.9", 99.9}};

static void db_lat(FILE *f, const merged_t *m, int with_min_mean)
{
    fprintf(f, "\"latency_us\": {");
    if (with_min_mean) {
        fprintf(f, "\"min\": ");
        jnum(f, m->n ? (double)m->min / 1e3 : 0, 3);
        fprintf(f, ", \"mean\": ");
        jnum(f, m->n ? m->mean / 1e3 : 0, 3);
        fprintf(f, ", ");
    }
    for (size_t i = 0; i < sizeof DBP / sizeof DBP[0]; i++) {
        fprintf(f, "\"%s\": ", DBP[i].k);
        jnum(f, op_percentile(m, DBP[i].p) / 1e3, 3);
        fprintf(f, ", ");
    }
    fprintf(f, "\"max\": ");
    jnum(f, m->n ? (double)m->max / 1e3 : 0, 3);
    fputc('}', f);
}

static void write_db(FILE *f, report_t *r, const summary_t *s)
{
    const options_t *o = r->o;
    bench_t *b = r->b;
    double el = s->elapsed_s;
    dbresult_t dr;
    db_result(b, &dr);
    merged_t *cm = calloc(1, sizeof *cm);
    uint64_t txns = 0;
    if (!cm) { fprintf(f, "  \"db\": null,\n"); return; }
    for (int i = 0; i < b->nth; i++)
        if (b->th[i].role == DB_READER) { merged_add(cm, b->th[i].xst); txns += b->th[i].txns; }
    fprintf(f, "  \"db\": {\n    \"config\": {\"readers\": %d, \"page_size\": %llu, \"log_block_size\": %llu, "
            "\"flusher_threads\": %d, \"group_commit_max\": %d, \"working_set\": %llu, \"reads_per_txn\": %llu, "
            "\"flush_rate\": ", o->threads, (unsigned long long)o->block_size, (unsigned long long)o->db_log_block,
            o->db_flushers, o->db_group_max > 0 ? o->db_group_max : o->threads,
            (unsigned long long)(o->file_size * o->file_num), (unsigned long long)o->db_reads_per_txn);
    jnum(f, o->db_flush_rate, 3);
    fprintf(f, ", \"log_file\": \"%s\", \"log_size\": %llu},\n", DB_LOG_NAME, (unsigned long long)o->db_log_size);
    fprintf(f, "    \"transactions\": {\"count\": %llu, \"per_sec\": ", (unsigned long long)txns);
    jnum(f, el > 0 ? (double)txns / el : 0, 3);
    fprintf(f, "},\n    \"commits\": {\"count\": %llu, \"per_sec\": ", (unsigned long long)dr.commits);
    jnum(f, el > 0 ? (double)dr.commits / el : 0, 3);
    fprintf(f, ", \"txn_per_commit\": ");
    jnum(f, dr.commits ? (double)dr.txns_in_commits / (double)dr.commits : 0, 3);
    fprintf(f, ",\n      ");
    db_lat(f, cm, 1);
    fprintf(f, "},\n    \"log_writes\": {\"count\": %llu, \"bytes\": %llu, \"per_sec\": ",
            (unsigned long long)dr.log_writes, (unsigned long long)dr.log_bytes);
    jnum(f, el > 0 ? (double)dr.log_writes / el : 0, 3);
    static const char *names[] = {"page_reads", "page_writes"};
    for (int k = 0; k < 2; k++) {
        const merged_t *m = &s->op[k == 0 ? OP_READ : OP_WRITE];
        fprintf(f, "},\n    \"%s\": {\"count\": %llu, \"per_sec\": ", names[k], (unsigned long long)m->n);
        jnum(f, el > 0 ? (double)m->n / el : 0, 3);
        if (k == 1) {
            if (o->db_flush_rate > 0) fprintf(f, ", \"slots_dropped\": %llu", (unsigned long long)dr.slots_dropped);
            else fprintf(f, ", \"slots_dropped\": null");
        }
        fprintf(f, ",\n      ");
        db_lat(f, m, 0);
    }
    fprintf(f, "}\n  },\n");
    free(cm);
}

static void write_search(FILE *f, const report_t *r)
{
    const search_res_t *sr = r->search;
    const options_t *o = r->o;
    int other = strcmp(o->search_pct_name, "p99") != 0;
    fprintf(f, "  \"search\": {\"knob\": \"%s\", \"percentile\": \"%s\", \"bound_ms\": ",
            o->search == SEARCH_THREADS ? "threads" : "iodepth", o->search_pct_name);
    jnum(f, o->search_bound_ms, 3);
    fprintf(f, ", \"stopped\": \"%s\",\n    \"steps\": [", sr->stopped);
    for (int i = 0; i < sr->nsteps; i++) {
        const search_step_t *st = &sr->steps[i];
        fprintf(f, "%s\n      {\"threads\": %d, \"iodepth\": %d, \"iops\": ", i ? "," : "", st->threads, st->iodepth);
        jnum(f, st->iops, 3);
        fprintf(f, ", \"p99_us\": ");
        jnum(f, st->p99_us, 3);
        if (other) { fprintf(f, ", \"%s_us\": ", o->search_pct_name); jnum(f, st->pct_us, 3); }
        fprintf(f, ", \"elapsed_s\": ");
        jnum(f, st->elapsed_s, 3);
        fputc('}', f);
    }
    fprintf(f, "%s],\n    \"best\": ", sr->nsteps ? "\n    " : "");
    if (sr->best >= 0) {
        const search_step_t *st = &sr->steps[sr->best];
        fprintf(f, "{\"threads\": %d, \"iodepth\": %d, \"iops\": ", st->threads, st->iodepth);
        jnum(f, st->iops, 3);
        fprintf(f, ", \"p99_us\": ");
        jnum(f, st->p99_us, 3);
        if (other) { fprintf(f, ", \"%s_us\": ", o->search_pct_name); jnum(f, st->pct_us, 3); }
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, "},\n");
}

static void write_steady(FILE *f, const report_t *r)
{
    const ss_res_t *sr = r->steady;
    const options_t *o = r->o;
    static const char *mn[] = {"iops", "mib_per_sec", "lat_p99_us"};
    fprintf(f, "  \"steady_state\": {\"enabled\": true, \"reached\": %s, \"round\": ", sr->reached ? "true" : "false");
    if (sr->reached) fprintf(f, "%d", sr->round); else fputs("null", f);
    fprintf(f, ", \"stopped\": \"%s\", \"window\": %d, \"range_pct\": ", sr->stopped, o->ss_window);
    jnum(f, o->ss_range_pct, 3);
    fprintf(f, ", \"slope_pct\": ");
    jnum(f, o->ss_slope_pct, 3);
    fprintf(f, ", \"max_rounds\": %d, \"metric\": \"%s\", \"round_time_s\": ", o->ss_max_rounds, mn[o->ss_metric]);
    jnum(f, o->ss_round_time_s, 3);
    fprintf(f, ", \"measured_rounds\": [%d, %d],\n    \"evaluation\": ", sr->window_first, sr->nrounds);
    if (sr->evaluated) {
        const ss_eval_t *e = &sr->ev;
        fprintf(f, "{\"avg\": "); jnum(f, e->avg, 3);
        fprintf(f, ", \"range\": "); jnum(f, e->range, 3);
        fprintf(f, ", \"range_limit\": "); jnum(f, e->range_limit, 3);
        fprintf(f, ", \"slope\": "); jnum(f, e->slope, 3);
        fprintf(f, ", \"slope_excursion\": "); jnum(f, e->slope_excursion, 3);
        fprintf(f, ", \"slope_limit\": "); jnum(f, e->slope_limit, 3);
        fprintf(f, ", \"range_ok\": %s, \"slope_ok\": %s}", e->range_ok ? "true" : "false", e->slope_ok ? "true" : "false");
    } else {
        fputs("null", f);
    }
    fprintf(f, ",\n    \"rounds\": [");
    for (int i = 0; i < sr->nrounds; i++) {
        const ss_round_t *x = &sr->rounds[i];
        fprintf(f, "%s\n      {\"round\": %d, \"iops\": ", i ? "," : "", x->round);
        jnum(f, x->iops, 3);
        fprintf(f, ", \"mib_per_sec\": "); jnum(f, x->mib_per_sec, 3);
        fprintf(f, ", \"lat_p99_us\": "); jnum(f, x->lat_p99_us, 3);
        fprintf(f, ", \"start_epoch\": %.6f, \"end_epoch\": %.6f}", x->start_epoch, x->end_epoch);
    }
    fprintf(f, "%s]},\n", sr->nrounds ? "\n    " : "");
}

static void write_precond(FILE *f, const report_t *r)
{
    const precond_res_t *p = r->precond;
    fprintf(f, "  \"precondition\": {\"passes\": %d, \"passes_requested\": %d, \"block_size\": %llu, \"bytes\": %llu, "
            "\"elapsed_s\": ", p->passes, r->o->passes, (unsigned long long)r->o->block_size, (unsigned long long)p->bytes);
    jnum(f, p->elapsed_s, 3);
    fprintf(f, ", \"mib_per_sec\": ");
    jnum(f, p->mib_per_sec, 3);
    fprintf(f, ", \"pass_mib_per_sec\": [");
    for (int i = 0; i < p->passes; i++) { if (i) fputs(", ", f); jnum(f, p->pass_mib_per_sec[i], 3); }
    fprintf(f, "], \"errors\": %llu},\n", (unsigned long long)p->errors);
}

static void write_op(FILE *f, const char *name, const merged_t *m, double elapsed, int last)
{
    double persec = elapsed > 0 ? (double)m->n / elapsed : 0;
    double mibs = elapsed > 0 ? (double)m->bytes / 1048576.0 / elapsed : 0;
    fprintf(f, "    \"%s\": {\"count\": %llu, \"bytes\": %llu, \"per_sec\": ", name,
            (unsigned long long)m->n, (unsigned long long)m->bytes);
    jnum(f, persec, 3);
    fprintf(f, ", \"mib_per_sec\": ");
    jnum(f, mibs, 3);
    fprintf(f, ",\n      \"latency_us\": {\"min\": ");
    jnum(f, m->n ? (double)m->min / 1e3 : 0, 3);
    fprintf(f, ", \"mean\": ");
    jnum(f, m->n ? m->mean / 1e3 : 0, 3);
    fprintf(f, ", \"stddev\": ");
    jnum(f, merged_stddev(m) / 1e3, 3);
    fprintf(f, ", \"max\": ");
    jnum(f, m->n ? (double)m->max / 1e3 : 0, 3);
    static const struct { const char *k; double p; } ps[] = {
        {"p50", 50}, {"p90", 90}, {"p95", 95}, {"p99", 99}, {"p99.9", 99.9}, {"p99.99", 99.99}};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        fprintf(f, ", \"%s\": ", ps[i].k);
        jnum(f, op_percentile(m, ps[i].p) / 1e3, 3);
    }
    fprintf(f, ", \"sum\": ");
    jnum(f, (double)m->sum / 1e3, 3);
    fprintf(f, "},\n      \"histogram\": {\"unit\": \"ns\", \"sub_bucket_bits\": %d, \"buckets\": [", HIST_BITS);
    int first = 1;
    for (uint32_t i = 0; i < HIST_N; i++) {
        if (!m->hist[i]) continue;
        fprintf(f, "%s[%u, %llu]", first ? "" : ", ", i, (unsigned long long)m->hist[i]);
        first = 0;
    }
    fprintf(f, "]}}%s\n", last ? "" : ",");
}

static void empty_op(FILE *f, const char *name, int last)
{
    merged_t m;
    memset(&m, 0, sizeof m);
    write_op(f, name, &m, 0, last);
}

/* "file" / "device" of a described error or mismatch */
static void where(FILE *f, const options_t *o, int fi)
{
    fprintf(f, "\"file\": ");
    if (o->device || fi == -2) fputs("null", f);
    else {
        char p[4200];
        if (fi == -1) snprintf(p, sizeof p, "%s/" DB_LOG_NAME, o->dir);
        else snprintf(p, sizeof p, "%s/" FILE_PREFIX "%d", o->dir, fi);
        jstr(f, p);
    }
    fprintf(f, ", \"device\": ");
    if (o->device) jstr(f, o->device); else fputs("null", f);
}

/* "verify": --verify's result (docs/iobench-json.md "verify") */
static void write_verify(FILE *f, const report_t *r)
{
    const options_t *o = r->o;
    const verify_state_t *v = &g_vf;
    fprintf(f, "  \"verify\": {\"enabled\": %s, \"reason\": ", v->enabled ? "true" : "false");
    if (v->enabled) fputs("null", f); else jstr(f, v->reason);
    fprintf(f, ", \"run_id\": \"%016llx\", \"crc32c\": \"%s\", \"checked\": %llu, \"corrupt\": %llu, "
            "\"misplaced\": %llu, \"stale\": %llu,\n    \"generation_map\": {\"tracked\": %s, \"blocks\": %llu, "
            "\"bytes\": %llu, \"reason\": ", (unsigned long long)v->run_id, crc32c_impl_name(),
            (unsigned long long)v->checked, (unsigned long long)v->bad[VK_CORRUPT], (unsigned long long)v->bad[VK_MISPLACED],
            (unsigned long long)v->bad[VK_STALE], v->tracked ? "true" : "false",
            (unsigned long long)(v->tracked ? v->map_blocks : 0), (unsigned long long)(v->tracked ? v->map_bytes : 0));
    if (v->tracked) fputs("null", f);
    else jstr(f, v->map_reason[0] ? v->map_reason : v->enabled ? "no generation map" : "verify is off");
    fprintf(f, "},\n    \"pass\": ");
    if (v->pass_done) {
        fprintf(f, "{\"blocks\": %llu, \"bytes\": %llu, \"elapsed_s\": ", (unsigned long long)v->pass_blocks,
                (unsigned long long)v->pass_bytes);
        jnum(f, v->pass_elapsed_s, 6);
        fprintf(f, ", \"mib_per_sec\": ");
        jnum(f, v->pass_elapsed_s > 0 ? (double)v->pass_bytes / 1048576.0 / v->pass_elapsed_s : 0, 3);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, ",\n    \"first\": [");
    for (int i = 0; i < v->ns; i++) {
        const vsample_t *x = &v->s[i];
        fprintf(f, "%s\n      {\"op\": \"%s\", ", i ? "," : "", x->op == VOP_PASS ? "verify_pass" : "read");
        where(f, o, x->fi);
        fprintf(f, ", \"offset\": %llu, \"kind\": \"%s\", \"expected\": ", (unsigned long long)(x->off + g_io_base),
                verify_kind_name(x->kind));
        jstr(f, x->expected);
        fprintf(f, ", \"found\": ");
        jstr(f, x->found);
        fprintf(f, ", \"found_offset\": ");
        if (x->found_off >= 0) fprintf(f, "%lld", (long long)(x->found_off + (long long)g_io_base)); else fputs("null", f);
        fputc('}', f);
    }
    fprintf(f, "%s]},\n", v->ns ? "\n    " : "");
}

static void esample_json(FILE *f, const options_t *o, int i)
{
    const esample_t *e = &g_el.s[i];
    char m[320];
    errlog_message(e, o, m, sizeof m);
    fprintf(f, "\"op\": ");
    jstr(f, e->op);
    fprintf(f, ", ");
    where(f, o, e->fi);
    fprintf(f, ", \"offset\": %llu, \"errno\": %d, \"errno_name\": ", (unsigned long long)(e->off + g_io_base), e->err);
    const char *en = e->err ? errno_name(e->err) : NULL;
    if (en) jstr(f, en); else fputs("null", f);
    fprintf(f, ", \"t_s\": ");
    jnum(f, g_el.t_s[i], 6);
    fprintf(f, ", \"message\": ");
    jstr(f, m);
}

/* "errors": every I/O error of the process counted by kind, the first ERR_SAMPLES described */
static void write_errors(FILE *f, const report_t *r, const summary_t *s)
{
    const options_t *o = r->o;
    (void)s;
    fprintf(f, "  \"errors\": {\"total\": %llu, \"by_kind\": {", (unsigned long long)g_el.total);
    int first = 1;
    for (int k = 0; k < ERR_KINDS; k++) {
        if (!g_el.by_kind[k]) continue;
        fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", err_kind_name(k), (unsigned long long)g_el.by_kind[k]);
        first = 0;
    }
    fprintf(f, "}, \"first\": ");
    if (g_el.n) {
        fprintf(f, "{\"kind\": \"%s\", ", err_kind_name(g_el.s[0].kind));
        esample_json(f, o, 0);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, ",\n    \"samples\": [");
    for (int i = 0; i < g_el.n; i++) {
        fprintf(f, "%s\n      {", i ? "," : "");
        esample_json(f, o, i);
        fputc('}', f);
    }
    fprintf(f, "%s],\n    \"ok_after_first\": %llu, \"max_errors\": %llu, \"stopped\": %s,\n    \"policy\": ",
            g_el.n ? "\n    " : "", (unsigned long long)g_el.ok_after_first, (unsigned long long)o->max_errors,
            g_el.stopped_max ? "\"max_errors\"" : "null");
    jstr(f, "an I/O error is counted and described and its thread goes on with its next request (a bad region is "
            "mapped, not stopped at); the workload stops at max_errors errors in total, or when an io_uring ring or "
            "the dbpattern redo log fails");
    fprintf(f, "},\n");
}

void write_json(FILE *f, report_t *r)
{
    const options_t *o = r->o;
    static const char *cmds[] = {"none", "prepare", "run", "cleanup", "precondition"};
    fprintf(f, "{\n  \"schema_version\": %d,\n  \"tool\": \"iobench\", \"version\": \"%s\",\n  \"command\": \"%s\",\n",
            IOBENCH_SCHEMA, IOBENCH_VERSION, cmds[o->command]);
    write_config_json(f, o);
    fprintf(f, "  \"environment\": {\"hostname\": ");
    jstr(f, r->env->hostname);
    fprintf(f, ", \"kernel\": ");
    jstr(f, r->env->kernel);
    fprintf(f, ", \"filesystem\": ");
    jstr(f, r->env->fs_name);
    fprintf(f, ", \"page_cache_dropped\": %s, \"logical_block_size\": %u},\n",
            r->env->page_cache_dropped ? "true" : "false", r->env->logical_block_size);
    if (r->prep && r->prep->done) {
        fprintf(f, "  \"prepare\": {\"files\": %llu, \"bytes\": %llu, \"elapsed_s\": ",
                (unsigned long long)r->prep->files, (unsigned long long)r->prep->bytes);
        jnum(f, r->prep->elapsed_s, 3);
        fprintf(f, ", \"mib_per_sec\": ");
        jnum(f, r->prep->mib_per_sec, 3);
        fprintf(f, "},\n");
    } else {
        fprintf(f, "  \"prepare\": null,\n");
    }
    if (r->cleanup_done && o->device)
        fprintf(f, "  \"cleanup\": {\"removed_files\": 0, \"zeroed_bytes\": %llu, \"zeroed_by\": \"%s\"},\n",
                (unsigned long long)r->zeroed, r->zeroed_by ? r->zeroed_by : "writes");
    else if (r->cleanup_done) fprintf(f, "  \"cleanup\": {\"removed_files\": %llu},\n", (unsigned long long)r->cleaned);
    else fprintf(f, "  \"cleanup\": null,\n");

    summary_t s;
    memset(&s, 0, sizeof s);
    if (r->ran) summarize(r->b, &s);
    double el = s.elapsed_s;
    if (r->ran) {
        fprintf(f, "  \"window\": {\"start_epoch\": %.6f, \"end_epoch\": %.6f", s.start_epoch, s.end_epoch);
        if (o->devstat_n) write_devstat(f, r->b->ds);
        fprintf(f, "},\n");
        fprintf(f, "  \"warmup_window\": {\"start_epoch\": %.6f, \"end_epoch\": %.6f},\n",
                /* on a schedule a late start shortens the warmup: it began when the threads were released */
                r->b->late_start || o->start_at > 0 ? r->b->epoch_at_start : s.start_epoch - o->warmup_s, s.start_epoch);
        if (g_start.done) fprintf(f, "  \"start_at\": %.6f, \"start_late_ms\": %.3f,\n", g_start.requested, g_start.late_ms);
        else fprintf(f, "  \"start_at\": null, \"start_late_ms\": null,\n");
    } else {
        fprintf(f, "  \"window\": null,\n");
    }
    fprintf(f, "  \"elapsed_s\": ");
    jnum(f, el, 6);
    fprintf(f, ",\n  \"interrupted\": %s, \"signal\": ", r->interrupted ? "true" : "false");
    if (r->signal) fprintf(f, "\"%s\"", r->signal == 2 ? "SIGINT" : r->signal == 15 ? "SIGTERM" : "OTHER");
    else fputs("null", f);
    fprintf(f, ",\n  \"ops\": {\n");
    if (r->ran) {
        write_op(f, "read", &s.op[OP_READ], el, 0);
        write_op(f, "write", &s.op[OP_WRITE], el, 0);
        write_op(f, "fsync", &s.op[OP_FSYNC], el, !commit_measured(o));
        if (commit_measured(o)) write_op(f, "commit", &s.commit, el, 1);
    } else {
        empty_op(f, "read", 0); empty_op(f, "write", 0); empty_op(f, "fsync", 1);
    }
    uint64_t rw = s.op[OP_READ].n + s.op[OP_WRITE].n;
    uint64_t rwb = s.op[OP_READ].bytes + s.op[OP_WRITE].bytes;
    fprintf(f, "  },\n  \"commit_op\": ");
    if (r->ran && commit_op(o)) fprintf(f, "\"%s\"", commit_op(o));
    else fputs("null", f);
    fprintf(f, ",\n  \"total\": {\"count\": %llu, \"events\": %llu, \"iops\": ", (unsigned long long)rw,
            (unsigned long long)s.events);
    jnum(f, el > 0 ? (double)rw / el : 0, 3);
    fprintf(f, ", \"mib_per_sec\": ");
    jnum(f, el > 0 ? (double)rwb / 1048576.0 / el : 0, 3);
    fprintf(f, "},\n");
    if (r->ran && r->search) write_search(f, r);
    else fprintf(f, "  \"search\": null,\n");
    if (r->ran && r->steady) write_steady(f, r);
    else fprintf(f, "  \"steady_state\": null,\n");
    if (r->precond) write_precond(f, r);
    if (r->ran && r->b->db) write_db(f, r, &s);
    else fprintf(f, "  \"db\": null,\n");

    /* threads */
    int n = r->ran ? r->b->nth : 0;
    fprintf(f, "  \"threads\": {\"count\": %d, \"events\": {\"avg\": ", r->ran ? r->b->nth : o->threads);
    jnum(f, s.ev_avg, 3);
    fprintf(f, ", \"stddev\": ");
    jnum(f, s.ev_std, 3);
    fprintf(f, ", \"min\": %.0f, \"max\": %.0f}, \"exec_time_s\": {\"avg\": ", s.ev_min, s.ev_max);
    jnum(f, s.time_avg, 6);
    fprintf(f, ", \"stddev\": ");
    jnum(f, s.time_std, 6);
    fprintf(f, "},\n    \"per_thread\": [");
    for (int i = 0; i < n; i++) {
        thread_t *t = &r->b->th[i];
        fprintf(f, "%s{\"id\": %d, \"events\": %llu, \"time_s\": ", i ? ", " : "", i,
                (unsigned long long)(t->st[0].n + t->st[1].n + t->st[2].n));
        jnum(f, (double)t->busy_ns / 1e9, 6);
        if (t->role) fprintf(f, ", \"role\": \"%s\"", t->role == DB_READER ? "reader" : t->role == DB_LOGWRITER ? "log_writer" : "flusher");
        if (o->debug_offsets_hash) fprintf(f, ", \"offsets_hash\": \"%016llx\"", (unsigned long long)t->offsets_hash);
        fputc('}', f);
    }
    fprintf(f, "]},\n");

    /* intervals */
    fprintf(f, "  \"intervals\": [");
    double ivs = o->report_interval_s;
    for (uint64_t j = 0; j < s.n_ival; j++) {
        ival_sum_t *v = &s.iv[j];
        double tend = (double)(j + 1) * ivs;
        double len = ivs;
        if (tend > el) { len = el - (double)j * ivs; tend = el; }
        if (len <= 0) len = ivs;
        uint64_t ops = v->ops[0] + v->ops[1];
        fprintf(f, "%s\n    {\"t\": ", j ? "," : "");
        jnum(f, tend, 3);
        fprintf(f, ", \"duration_s\": ");
        jnum(f, len, 3);
        fprintf(f, ", \"read_ops\": %llu, \"write_ops\": %llu, \"fsync_ops\": %llu, \"iops\": ",
                (unsigned long long)v->ops[0], (unsigned long long)v->ops[1], (unsigned long long)v->ops[2]);
        jnum(f, (double)ops / len, 3);
        fprintf(f, ", \"mib_per_sec\": ");
        jnum(f, (double)(v->bytes[0] + v->bytes[1]) / 1048576.0 / len, 3);
        static const char *kn[] = {"read", "write", "fsync"};
        for (int k = 0; k < OP_KINDS; k++) {
            double p99 = v->ops[k] ? hist_percentile32(v->hist[k], IVAL_N, IVAL_BITS, v->ops[k], 99) : 0;
            if (p99 > (double)v->lat_max[k]) p99 = (double)v->lat_max[k];
            fprintf(f, ", \"%s_p99_us\": ", kn[k]);
            jnum(f, p99 / 1e3, 3);
            fprintf(f, ", \"%s_mean_us\": ", kn[k]);
            jnum(f, v->ops[k] ? (double)v->lat_sum[k] / (double)v->ops[k] / 1e3 : 0, 3);
            fprintf(f, ", \"%s_max_us\": ", kn[k]);
            jnum(f, (double)v->lat_max[k] / 1e3, 3);
        }
        fputc('}', f);
    }
    fprintf(f, "%s],\n", s.n_ival ? "\n  " : "");

    write_verify(f, r);
    write_errors(f, r, &s);
    fprintf(f, "  \"exit_code\": %d\n}\n", r->exit_code);
    summary_free(&s);
}
