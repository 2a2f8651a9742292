/* JSON output, schema_version 1 (docs/iobench-json.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "summary.h"

static void jstr(FILE *f, const char *s)
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

static void jnum(FILE *f, double v, int prec)
{
    if (!isfinite(v)) { fputs("null", f); return; }
    fprintf(f, "%.*f", prec, v);
}

static void write_config(FILE *f, const options_t *o)
{
    fprintf(f, "  \"config\": {\"dir\": ");
    jstr(f, o->dir);
    fprintf(f, ", \"file_num\": %llu, \"file_size\": %llu, \"total_size\": %llu, \"total_size_requested\": %llu,\n",
            (unsigned long long)o->file_num, (unsigned long long)o->file_size,
            (unsigned long long)(o->file_size * o->file_num), (unsigned long long)o->total_size);
    fprintf(f, "             \"block_size\": %llu, \"mode\": ", (unsigned long long)o->block_size);
    if (o->mode == MODE_NONE) fputs("null", f); else jstr(f, mode_name(o->mode));
    fprintf(f, ", \"rw_ratio\": ");
    jnum(f, o->rw_ratio, 3);
    fprintf(f, ", \"threads\": %d, \"engine\": \"%s\", \"iodepth\": %d, \"direct\": %s,\n",
            o->threads, o->engine == ENGINE_URING ? "io_uring" : "sync", o->iodepth, o->direct ? "true" : "false");
    fprintf(f, "             \"open_flags\": [");
    int first = 1;
    if (o->open_sync) { fputs("\"sync\"", f); first = 0; }
    if (o->open_dsync) { fprintf(f, "%s\"dsync\"", first ? "" : ", "); }
    fprintf(f, "], \"fsync_freq\": %llu, \"fsync_all\": %s, \"fsync_end\": %s, \"fsync_mode\": \"%s\",\n",
            (unsigned long long)o->fsync_freq, o->fsync_all ? "true" : "false", o->fsync_end ? "true" : "false",
            o->fsync_mode == FSYNC_FDATASYNC ? "fdatasync" : "fsync");
    fprintf(f, "             \"time_s\": ");
    jnum(f, o->time_s, 3);
    fprintf(f, ", \"requests\": %llu, \"warmup_s\": ", (unsigned long long)o->requests);
    jnum(f, o->warmup_s, 3);
    fprintf(f, ", \"seed\": %llu, \"report_interval_s\": ", (unsigned long long)o->seed);
    jnum(f, o->report_interval_s, 3);
    fprintf(f, ", \"keep_cache\": %s, \"prepare\": %s, \"cleanup\": %s, \"format\": \"%s\"",
            o->keep_cache ? "true" : "false", o->do_prepare ? "true" : "false", o->do_cleanup ? "true" : "false",
            o->format == FMT_TEXT ? "text" : "json");
    if (o->search) {
        fprintf(f, ",\n             \"search\": \"%s\", \"search_bound_ms\": ", o->search == SEARCH_THREADS ? "threads" : "iodepth");
        jnum(f, o->search_bound_ms, 3);
        fprintf(f, ", \"search_max\": %d, \"search_step_time_s\": ", o->search_max);
        jnum(f, o->search_step_time_s, 3);
        fprintf(f, ", \"search_percentile\": \"%s\", \"search_min_gain_pct\": ", o->search_pct_name);
        jnum(f, o->search_min_gain, 3);
    }
    if (o->mode == MODE_DBPATTERN) {
        fprintf(f, ",\n             \"db_reads_per_txn\": %llu, \"db_log_block\": %llu, \"db_log_size\": %llu, "
                "\"db_flushers\": %d, \"db_flush_rate\": ", (unsigned long long)o->db_reads_per_txn,
                (unsigned long long)o->db_log_block, (unsigned long long)o->db_log_size, o->db_flushers);
        jnum(f, o->db_flush_rate, 3);
        fprintf(f, ", \"db_group_commit_max\": %d", o->db_group_max);
    }
    fprintf(f, "},\n");
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

void write_json(FILE *f, report_t *r)
{
    const options_t *o = r->o;
    static const char *cmds[] = {"none", "prepare", "run", "cleanup"};
    fprintf(f, "{\n  \"schema_version\": %d,\n  \"tool\": \"iobench\", \"version\": \"%s\",\n  \"command\": \"%s\",\n",
            IOBENCH_SCHEMA, IOBENCH_VERSION, cmds[o->command]);
    write_config(f, o);
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
    if (r->cleanup_done) fprintf(f, "  \"cleanup\": {\"removed_files\": %llu},\n", (unsigned long long)r->cleaned);
    else fprintf(f, "  \"cleanup\": null,\n");

    summary_t s;
    memset(&s, 0, sizeof s);
    if (r->ran) summarize(r->b, &s);
    double el = s.elapsed_s;
    if (r->ran) {
        fprintf(f, "  \"window\": {\"start_epoch\": %.6f, \"end_epoch\": %.6f},\n", s.start_epoch, s.end_epoch);
        fprintf(f, "  \"warmup_window\": {\"start_epoch\": %.6f, \"end_epoch\": %.6f},\n",
                s.start_epoch - o->warmup_s, s.start_epoch);
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
        write_op(f, "fsync", &s.op[OP_FSYNC], el, 1);
    } else {
        empty_op(f, "read", 0); empty_op(f, "write", 0); empty_op(f, "fsync", 1);
    }
    uint64_t rw = s.op[OP_READ].n + s.op[OP_WRITE].n;
    uint64_t rwb = s.op[OP_READ].bytes + s.op[OP_WRITE].bytes;
    fprintf(f, "  },\n  \"total\": {\"count\": %llu, \"events\": %llu, \"iops\": ", (unsigned long long)rw,
            (unsigned long long)s.events);
    jnum(f, el > 0 ? (double)rw / el : 0, 3);
    fprintf(f, ", \"mib_per_sec\": ");
    jnum(f, el > 0 ? (double)rwb / 1048576.0 / el : 0, 3);
    fprintf(f, "},\n");
    if (r->ran && r->search) write_search(f, r);
    else fprintf(f, "  \"search\": null,\n");
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

    /* errors */
    fprintf(f, "  \"errors\": {\"total\": %llu, \"by_kind\": {", (unsigned long long)s.err_total);
    int first = 1;
    for (int k = 0; k < ERR_KINDS; k++) {
        if (!s.errs[k]) continue;
        fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", err_kind_name(k), (unsigned long long)s.errs[k]);
        first = 0;
    }
    fprintf(f, "}, \"first\": ");
    if (s.first_err) {
        fprintf(f, "{\"kind\": \"%s\", \"message\": ", err_kind_name(s.first_err_kind));
        jstr(f, s.first_err);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, ", \"policy\": \"a thread stops at its first I/O error; the others continue\"},\n");
    fprintf(f, "  \"exit_code\": %d\n}\n", r->exit_code);
    summary_free(&s);
}
