/* sync engine: pread/pwrite, one request in flight per thread. Per I/O: two vDSO
 * clock reads, the syscall, and thread-local bookkeeping. An I/O error is counted and
 * described and the thread goes on with its next request; the run stops at --max-errors
 * (docs/iobench.md "I/O errors"). With --verify every write is stamped and every read
 * checked (verify.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>
#include "iobench.h"

/* vfy is a constant in each of the two copies the compiler makes: without --verify the loop
 * has none of its branches */
static inline __attribute__((always_inline)) void *sync_loop(thread_t *t, const int vfy)
{
    bench_t *b = t->b;
    const options_t *o = b->o;
    const uint64_t bs = o->block_size;
    const uint64_t limit = t->req_limit;
    const int writes_possible = o->mode != MODE_SEQRD && o->mode != MODE_RNDRD;
    unsigned char *buf = t->buf;
    uint32_t *const vmap = b->vmap;
    /* --rate-iops: this thread's requests are due every gap ns (issue times fixed in advance;
     * latency is still measured from the actual issue). A cap, not an average: the slots a
     * slow request or a stalled host let pass are dropped, never made up in a burst, so no
     * window of W s holds more than W x rate issues, plus two per thread at its edges */
    const uint64_t gap = o->rate_iops > 0 ? (uint64_t)(1e9 * (double)b->nth / o->rate_iops) : 0;
    uint64_t due = 0;
    if (atomic_load(&b->stop)) return NULL;

    for (;;) {
        if (stop_requested(b)) break;
        if (limit && t->measured >= limit) break;
        if (gap) {
            uint64_t now = now_ns();
            if (!due || (now > due && now - due >= gap)) due = now;
            if (due >= bench_deadline(b)) break;
            while (due > now && !stop_requested(b)) {   /* sleep in slices of at most 50 ms */
                uint64_t until = due - now > 50000000ull ? now + 50000000ull : due;
                struct timespec ts = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                now = now_ns();
            }
            if (stop_requested(b)) break;
            due += gap;
        }
        int kind;
        uint64_t fi, off;
        pick_op(t, &kind, &fi, &off);
        int fd = b->fds[fi];
        ssize_t r;
        uint64_t t0, t1;
        uint32_t gen = 0, seq = 0;
        if (kind == OP_READ) {
            t0 = now_ns();
            r = pread(fd, buf, bs, (off_t)(off + g_io_base));
            t1 = now_ns();
        } else {
            unsigned char *wb = write_buffer(t, off);
            if (vfy) {
                gen = verify_next_gen(t, vmap, verify_blk(b, fi, off));
                if (g_wit.ent) witness_stamp(wb, bs, seq = atomic_fetch_add(&g_wit.seq, 1) + 1);
                verify_stamp(wb, bs, (uint32_t)fi, off, gen);
            }
            t0 = now_ns();
            r = pwrite(fd, wb, bs, (off_t)(off + g_io_base));
            t1 = now_ns();
        }
        if (__builtin_expect(r != (ssize_t)bs, 0)) {
            if (r < 0 && errno == EINTR) continue;
            int e = r < 0 ? errno : 0;
            int k = r < 0 ? (e < ERR_SLOTS ? e : ERR_OTHER) : (kind == OP_READ ? ERR_SHORT_READ : ERR_SHORT_WRITE);
            record_error(t, k, (int)fi, off, kind == OP_READ ? "read" : "write", e);
            if (vfy && kind == OP_WRITE) verify_written(vmap, verify_blk(b, fi, off), gen, 0);
            if (t1 >= bench_deadline(b)) break;
            continue;
        }
        record_op(t, kind, t0, t1, bs);
        if (kind == OP_WRITE) {
            if (vfy) verify_written(vmap, verify_blk(b, fi, off), gen, 1);
            /* --witness: the write is durable once O_DSYNC returned, or its fsync (--fsync-all) */
            if (after_write(t, (int)fi, t0) == 0 && vfy && g_wit.ent) witness_ack(verify_blk(b, fi, off), gen, seq);
        } else if (vfy) {
            verify_check(&t->vc, VOP_READ, o, vmap, (int)fi, off, buf, bs);
        }
        if (t1 >= bench_deadline(b)) break;
    }
    if (writes_possible && t->err_total == 0) fsync_end_all(t);
    return NULL;
}

void *engine_sync_thread(thread_t *t)
{
    return t->b->o->verify_on ? sync_loop(t, 1) : sync_loop(t, 0);
}
