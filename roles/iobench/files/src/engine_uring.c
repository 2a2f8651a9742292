/* io_uring engine through the raw system calls (no liburing). Each thread owns a ring
 * with --iodepth entries and keeps that many requests in flight.
 *
 * Latency of a request = fio's completion latency (clat): from its own submission (kept in
 * the request's slot, named by its user_data) to its own completion, the instant the thread
 * found its CQE in the completion ring (one clock read per reaped batch, as fio's per-batch
 * completion time). Submission instant: fio (one request per io_uring_enter by default)
 * takes the return of the call that submitted it; a call here submits up to --iodepth
 * requests and only submits (no GETEVENTS: completion work runs in the next call), the
 * kernel issuing them in queue order during the call, so request i of the n the call
 * consumed gets start + (end - start) * (i + 1) / n of that call. Requests that
 * one io_uring_enter() did not consume keep no time until the call that does. With IOBENCH_URING_ONECALL=1 (submit and wait in one call)
 * the submission instant is just before that call. docs/iobench.md "io_uring latency".
 * fsync requests (--fsync-freq/--fsync-all/--fsync-end) are issued synchronously by the
 * thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "iobench.h"

typedef struct ring {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    void *sq_ptr, *cq_ptr;
    size_t sq_sz, cq_sz, sqes_sz;
    int single_mmap;
    int fixed_files;
} ring_t;

static int sys_setup(unsigned entries, struct io_uring_params *p)
{
    return (int)syscall(__NR_io_uring_setup, entries, p);
}
static int sys_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags)
{
    return (int)syscall(__NR_io_uring_enter, fd, to_submit, min_complete, flags, NULL, 0);
}
static int sys_register(int fd, unsigned op, const void *arg, unsigned nr)
{
    return (int)syscall(__NR_io_uring_register, fd, op, arg, nr);
}

static int debug_fail_errno(void)
{
    const char *e = getenv("IOBENCH_DEBUG_URING_ERRNO");   /* test hook: simulate refusal */
    if (!e || !*e) return 0;
    if (!strcmp(e, "ENOSYS")) return ENOSYS;
    if (!strcmp(e, "EPERM")) return EPERM;
    return atoi(e);
}

int uring_probe(char *msg, size_t n)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int e = debug_fail_errno();
    int fd = e ? -1 : sys_setup(1, &p);
    if (fd < 0) {
        if (!e) e = errno;
        if (e == ENOSYS)
            snprintf(msg, n, "--engine io_uring: this kernel has no io_uring (io_uring_setup: %s); use --engine sync", strerror(e));
        else if (e == EPERM || e == EACCES)
            snprintf(msg, n, "--engine io_uring: io_uring is refused here (io_uring_setup: %s; see sysctl "
                     "kernel.io_uring_disabled or the seccomp/container policy); use --engine sync", strerror(e));
        else
            snprintf(msg, n, "--engine io_uring: io_uring_setup failed: %s; use --engine sync", strerror(e));
        return -1;
    }
    close(fd);
    return 0;
}

static int ring_init(ring_t *r, unsigned entries, const int *fds, unsigned nfds)
{
    struct io_uring_params p;
    memset(r, 0, sizeof *r);
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    const char *ev = getenv("IOBENCH_URING_SETUP_FLAGS");     /* experiments */
    if (ev) p.flags = (unsigned)strtoul(ev, NULL, 0);
    r->fd = sys_setup(entries, &p);
    if (r->fd < 0 && errno == EINVAL) {
        memset(&p, 0, sizeof p);
        r->fd = sys_setup(entries, &p);
    }
    if (r->fd < 0) return -errno;
    r->single_mmap = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    r->sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (r->single_mmap) {
        if (r->cq_sz > r->sq_sz) r->sq_sz = r->cq_sz;
        r->cq_sz = r->sq_sz;
    }
    r->sq_ptr = mmap(NULL, r->sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    if (r->sq_ptr == MAP_FAILED) { int e = errno; close(r->fd); return -e; }
    if (r->single_mmap) r->cq_ptr = r->sq_ptr;
    else {
        r->cq_ptr = mmap(NULL, r->cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
        if (r->cq_ptr == MAP_FAILED) { int e = errno; munmap(r->sq_ptr, r->sq_sz); close(r->fd); return -e; }
    }
    char *sq = r->sq_ptr, *cq = r->cq_ptr;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    r->sqes_sz = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(NULL, r->sqes_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED) {
        int e = errno;
        munmap(r->sq_ptr, r->sq_sz);
        if (!r->single_mmap) munmap(r->cq_ptr, r->cq_sz);
        close(r->fd);
        return -e;
    }
    if (!getenv("IOBENCH_URING_NO_FIXED") && nfds <= 32768 && sys_register(r->fd, IORING_REGISTER_FILES, fds, nfds) == 0) r->fixed_files = 1;
    return 0;
}

static void ring_free(ring_t *r)
{
    /* drop the registered files now: left to the ring's asynchronous teardown, they would keep
     * the files open for a while, and an O_EXCL block device (--device) busy for its cleanup */
    if (r->fixed_files) sys_register(r->fd, IORING_UNREGISTER_FILES, NULL, 0);
    munmap(r->sqes, r->sqes_sz);
    munmap(r->sq_ptr, r->sq_sz);
    if (!r->single_mmap) munmap(r->cq_ptr, r->cq_sz);
    close(r->fd);
}

typedef struct slot {
    uint64_t t0, off;
    int fi, kind;
    uint64_t blk;              /* --verify: the block in flight, UINT64_MAX = none */
    uint32_t gen;              /* --verify: generation of the write */
} slot_t;

/* --verify: is block blk in flight in one of this thread's slots? */
static int blk_in_flight(const slot_t *slots, unsigned depth, uint64_t blk)
{
    for (unsigned i = 0; i < depth; i++) if (slots[i].blk == blk) return 1;
    return 0;
}

/* vfy is a constant in each of the two copies the compiler makes: without --verify the loop
 * has none of its branches */
static inline __attribute__((always_inline)) void *uring_loop(thread_t *t, const int vfy)
{
    bench_t *b = t->b;
    const options_t *o = b->o;
    const uint64_t bs = o->block_size;
    const unsigned depth = (unsigned)o->iodepth;
    const uint64_t limit = t->req_limit;
    const int writes_possible = o->mode != MODE_SEQRD && o->mode != MODE_RNDRD;
    if (atomic_load(&b->stop)) return NULL;
    ring_t r;
    int rc = ring_init(&r, depth, b->fds, (unsigned)o->file_num);
    if (rc < 0) {
        pthread_mutex_lock(&b->setup_lock);
        if (!b->setup_failed)
            snprintf(b->setup_err, sizeof b->setup_err, "--engine io_uring: thread %d: ring setup failed: %s",
                     t->id, strerror(-rc));
        b->setup_failed = 1;
        pthread_mutex_unlock(&b->setup_lock);
        return NULL;
    }
    slot_t *slots = calloc(depth, sizeof *slots);
    unsigned *freel = malloc(depth * sizeof *freel);
    unsigned *fresh = malloc(depth * sizeof *fresh);   /* slots queued, not yet consumed by the kernel, in order */
    if (!slots || !freel || !fresh) { free(slots); free(freel); free(fresh); ring_free(&r); return NULL; }
    unsigned nfree = depth, nfresh = 0;
    for (unsigned i = 0; i < depth; i++) { freel[i] = depth - 1 - i; slots[i].blk = UINT64_MAX; }
    uint32_t *const vmap = b->vmap;
    unsigned inflight = 0, to_submit = 0;
    int stopping = 0;
    uint64_t last = 0;
    const unsigned sq_mask = *r.sq_mask, cq_mask = *r.cq_mask;
    const int split_wait = getenv("IOBENCH_URING_ONECALL") == NULL;   /* submit, then wait: measured faster */

    for (;;) {
        if (!stopping && (stop_requested(b) || last >= bench_deadline(b))) stopping = 1;
        if (!stopping) {
            unsigned tail = *r.sq_tail;
            while (inflight < depth && (!limit || t->measured + inflight < limit)) {
                int kind;
                uint64_t fi, off;
                if (t->held) { kind = t->held_kind; fi = t->held_fi; off = t->held_off; t->held = 0; }
                else pick_op(t, &kind, &fi, &off);
                if (vfy && blk_in_flight(slots, depth, verify_blk(b, fi, off))) {
                    /* never two requests on one block: this one waits for the other's completion */
                    t->held = 1; t->held_kind = kind; t->held_fi = fi; t->held_off = off;
                    break;
                }
                unsigned si = freel[--nfree];
                slot_t *s = &slots[si];
                s->kind = kind;
                s->fi = (int)fi;
                s->off = off;
                unsigned char *buf;
                unsigned idx = tail & sq_mask;
                struct io_uring_sqe *sqe = &r.sqes[idx];
                memset(sqe, 0, sizeof *sqe);
                if (s->kind == OP_READ) { sqe->opcode = IORING_OP_READ; buf = t->buf + (size_t)si * bs; }
                else if (!vfy) { sqe->opcode = IORING_OP_WRITE; buf = write_buffer(t, off); }
                else {       /* the slot's own buffer: never re-stamped while in flight */
                    sqe->opcode = IORING_OP_WRITE;
                    buf = t->buf + (size_t)si * bs;
                    s->gen = verify_next_gen(t, vmap, verify_blk(b, fi, off));
                    verify_stamp(buf, bs, (uint32_t)fi, off, s->gen);
                }
                if (vfy) s->blk = verify_blk(b, fi, off);
                if (r.fixed_files) { sqe->fd = (int)fi; sqe->flags = IOSQE_FIXED_FILE; }
                else sqe->fd = b->fds[fi];
                sqe->addr = (uint64_t)(uintptr_t)buf;
                sqe->len = (unsigned)bs;
                sqe->off = off + g_io_base;
                sqe->user_data = si;
                r.sq_array[idx] = idx;
                tail++;
                fresh[nfresh++] = si;
                inflight++;
                to_submit++;
            }
            __atomic_store_n(r.sq_tail, tail, __ATOMIC_RELEASE);
        }
        if (inflight == 0) break;
        int ret = 0;
        if (split_wait) {          /* submit, then wait (unless a completion is already posted) */
            if (to_submit) {
                uint64_t tb = now_ns();
                ret = sys_enter(r.fd, to_submit, 0, 0);   /* submission only: the call's time is submitting */
                if (ret >= 0) {
                    unsigned done = (unsigned)ret < to_submit ? (unsigned)ret : to_submit;
                    uint64_t te = now_ns();
                    /* the kernel issues the consumed requests in queue order during the call:
                     * request i of n has been submitted at tb + (te - tb) * (i + 1) / n */
                    for (unsigned i = 0; i < done; i++) slots[fresh[i]].t0 = tb + (te - tb) * (i + 1) / done;
                    memmove(fresh, fresh + done, (nfresh - done) * sizeof *fresh);
                    nfresh -= done;
                    to_submit -= done;
                    ret = 0;
                }
            }
            if (ret >= 0 && __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE) == *r.cq_head)
                ret = sys_enter(r.fd, 0, 1, IORING_ENTER_GETEVENTS);
        } else {
            uint64_t ts = now_ns();
            ret = sys_enter(r.fd, to_submit, 1, IORING_ENTER_GETEVENTS);
            if (ret >= 0) {
                unsigned done = (unsigned)ret < to_submit ? (unsigned)ret : to_submit;
                for (unsigned i = 0; i < done; i++) slots[fresh[i]].t0 = ts;
                memmove(fresh, fresh + done, (nfresh - done) * sizeof *fresh);
                nfresh -= done;
                to_submit -= done;
            }
        }
        if (ret < 0) {
            int e = errno;
            if (e != EINTR && e != EAGAIN && e != EBUSY) {
                record_error(t, e < ERR_SLOTS ? e : ERR_OTHER, -2, 0, "io_uring_enter", e);
                break;   /* ring unusable: in-flight requests die with the ring */
            }
        }
        uint64_t t1 = now_ns();
        last = t1;
        unsigned head = *r.cq_head;
        unsigned ctail = __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE);
        while (head != ctail) {
            struct io_uring_cqe *cqe = &r.cqes[head & cq_mask];
            unsigned si = (unsigned)cqe->user_data;
            int res = cqe->res;
            head++;
            slot_t *s = &slots[si];
            freel[nfree++] = si;
            inflight--;
            if (__builtin_expect(res != (int)bs, 0)) {
                int e = res < 0 ? -res : 0;
                int k = res < 0 ? (e < ERR_SLOTS ? e : ERR_OTHER) : (s->kind == OP_READ ? ERR_SHORT_READ : ERR_SHORT_WRITE);
                record_error(t, k, s->fi, s->off, s->kind == OP_READ ? "read" : "write", e);
                if (vfy && s->kind == OP_WRITE) verify_written(vmap, s->blk, s->gen, 0);
                s->blk = UINT64_MAX;
                continue;
            }
            record_op(t, s->kind, s->t0, t1, bs);
            if (s->kind == OP_WRITE) {
                if (vfy) verify_written(vmap, s->blk, s->gen, 1);
                after_write(t, s->fi, s->t0);
            } else if (vfy) {
                verify_check(&t->vc, VOP_READ, o, vmap, s->fi, s->off, t->buf + (size_t)si * bs, bs);
            }
            s->blk = UINT64_MAX;
        }
        __atomic_store_n(r.cq_head, head, __ATOMIC_RELEASE);
    }
    if (writes_possible && t->err_total == 0) fsync_end_all(t);
    free(slots); free(freel); free(fresh);
    ring_free(&r);
    return NULL;
}

void *engine_uring_thread(thread_t *t)
{
    return t->b->o->verify_on ? uring_loop(t, 1) : uring_loop(t, 0);
}
