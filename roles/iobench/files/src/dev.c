/* --device /dev/X [--offset O] [--size N]: a raw block device as the target instead of --dir.
 *
 * The working set is bytes [O, O + N) of the device (N = --size, else up to the device's end),
 * rounded down to the block size, addressed as one "file" (g_io_base = O: iobench.h). The device must be a block device and is
 * opened O_EXCL (the kernel refuses it with EBUSY while it, or a partition of it, is mounted
 * or held by LVM, RAID, swap, dm ...) and always O_DIRECT. Whether the device may be
 * destroyed (signatures, partitions, the opt-in) is the controller's decision before iobench
 * runs (plugins/module_utils/devices/blockdev.py); iobench only refuses what it can see cheaply.
 * prepare writes incompressible data over the working set; cleanup zeroes the working set
 * (zero_method: BLKZEROOUT, or zero writes) so that a device that was blank is blank again. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "iobench.h"

#define DEV_CHUNK (1u << 20)

uint64_t g_io_base;

int dev_setup(options_t *o, envinfo_t *env)
{
    memset(env, 0, sizeof *env);
    struct stat st;
    if (stat(o->device, &st) != 0) {
        err_msg("--device %s: %s", o->device, strerror(errno));
        return EXIT_ENV;
    }
    if (!S_ISBLK(st.st_mode)) {
        err_msg("--device %s is not a block device; refusing (use --dir for a directory on a filesystem)", o->device);
        return EXIT_ENV;
    }
    int fd = open(o->device, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { err_msg("--device %s: cannot open: %s", o->device, strerror(errno)); return EXIT_ENV; }
    uint64_t bytes = 0;
    int lbs = 512;
    if (ioctl(fd, BLKGETSIZE64, &bytes) != 0 || ioctl(fd, BLKSSZGET, &lbs) != 0 || lbs <= 0) {
        err_msg("--device %s: cannot read its size: %s", o->device, strerror(errno));
        close(fd);
        return EXIT_ENV;
    }
    close(fd);
    if (o->dev_offset % (uint64_t)lbs || o->dev_offset >= bytes) {
        err_msg("--offset %llu is not inside --device %s (%llu bytes) at a multiple of its logical block size %d",
                (unsigned long long)o->dev_offset, o->device, (unsigned long long)bytes, lbs);
        return EXIT_USAGE;
    }
    uint64_t want = o->dev_size ? o->dev_size : bytes - o->dev_offset;
    if (want > bytes - o->dev_offset) {
        err_msg("--size %llu from --offset %llu ends beyond --device %s (%llu bytes)", (unsigned long long)want,
                (unsigned long long)o->dev_offset, o->device, (unsigned long long)bytes);
        return EXIT_USAGE;
    }
    g_io_base = o->dev_offset;
    o->dev_bytes = bytes;
    o->file_num = 1;
    o->total_size = want;
    o->file_size = want / o->block_size * o->block_size;
    if (o->file_size == 0) {
        err_msg("--device %s: the working set (%llu bytes) is smaller than --block-size %llu", o->device,
                (unsigned long long)want, (unsigned long long)o->block_size);
        return EXIT_USAGE;
    }
    if (o->file_size / o->block_size < (uint64_t)o->threads && o->command == CMD_RUN && o->mode <= MODE_SEQRD) {
        err_msg("--threads %d is more than the %llu blocks of the working set", o->threads,
                (unsigned long long)(o->file_size / o->block_size));
        return EXIT_USAGE;
    }
    env->logical_block_size = (uint32_t)lbs;
    env->lbs_from_sysfs = 1;
    snprintf(env->fs_name, sizeof env->fs_name, "blockdev");
    if (gethostname(env->hostname, sizeof env->hostname - 1) != 0) snprintf(env->hostname, sizeof env->hostname, "unknown");
    struct utsname u;
    if (uname(&u) == 0) snprintf(env->kernel, sizeof env->kernel, "%s", u.release);
    return 0;
}

static int dev_open_fd(const options_t *o, int write)
{
    int fd = open(o->device, (write ? O_RDWR : O_RDONLY) | O_EXCL | O_DIRECT | O_CLOEXEC |
                  (o->open_sync ? O_SYNC : 0) | (o->open_dsync ? O_DSYNC : 0));
    if (fd < 0) {
        int e = errno;
        if (e == EBUSY)
            err_msg("--device %s is in use (mounted, or held by a partition, LVM, RAID, swap or device mapper); refusing",
                    o->device);
        else
            err_msg("--device %s: cannot open: %s", o->device, strerror(e));
    }
    return fd;
}

int dev_open(const options_t *o, int **fds_out)
{
    int *fds = malloc(sizeof *fds);
    if (!fds) return EXIT_INTERNAL;
    fds[0] = dev_open_fd(o, o->mode != MODE_SEQRD && o->mode != MODE_RNDRD);
    if (fds[0] < 0) { free(fds); return EXIT_ENV; }
    *fds_out = fds;
    return 0;
}

static unsigned char *chunk_buf(void)
{
    void *p = NULL;
    return posix_memalign(&p, 4096, DEV_CHUNK) == 0 ? p : NULL;
}

int dev_prepare(const options_t *o, prep_result_t *pr)
{
    memset(pr, 0, sizeof *pr);
    int fd = dev_open_fd(o, 1);
    if (fd < 0) return EXIT_ENV;
    unsigned char *buf = chunk_buf();
    if (!buf) { close(fd); return EXIT_INTERNAL; }
    uint64_t rng[4];
    rng_seed(rng, o->seed ^ 0x9e3779b97f4a7c15ull, 0x20000);
    uint64_t t0 = now_ns(), off = 0, end = o->file_size;
    int rc = 0;
    while (off < end) {
        if (atomic_load(&g_stop)) { rc = EXIT_INTR; break; }
        size_t n = end - off < DEV_CHUNK ? (size_t)(end - off) : DEV_CHUNK;
        rng_fill(rng, buf, n);
        if (o->verify_on) verify_stamp(buf, n, 0, off, 0);
        ssize_t w = pwrite(fd, buf, n, (off_t)(off + g_io_base));
        if (w != (ssize_t)n) {
            errlog_add("prepare write", 0, off, w < 0 ? errno : 0);
            err_msg("--device %s: prepare write at offset %llu failed: %s", o->device, (unsigned long long)(off + g_io_base),
                    w < 0 ? strerror(errno) : "short write");
            rc = EXIT_IOERR;
            break;
        }
        off += n;
    }
    if (!rc && fdatasync(fd) != 0) { err_msg("--device %s: fdatasync: %s", o->device, strerror(errno)); rc = EXIT_IOERR; }
    free(buf);
    close(fd);
    pr->files = 1;
    pr->bytes = off;
    pr->elapsed_s = (double)(now_ns() - t0) / 1e9;
    pr->mib_per_sec = pr->elapsed_s > 0 ? (double)off / 1048576.0 / pr->elapsed_s : 0;
    pr->done = rc == 0;
    return rc;
}

/* How cleanup zeroes the device, without provoking the kernel's capability probe where that
 * can be known (docs/kernel-log.md, "Capability probes"). BLKZEROOUT sends WRITE_ZEROES to a
 * device whose queue/write_zeroes_max_bytes is not 0 (when the device refuses it, the kernel
 * logs the failed request and writes zero pages instead); at 0 the kernel writes zero pages
 * at once, no probe. A loop device advertises write zeroes whenever its backing file's
 * filesystem has any fallocate, whether or not that filesystem zeroes a range (tmpfs and ZFS
 * do not): its answer says nothing, so iobench writes the zeros itself there.
 *   "writes"        iobench writes zeros (a loop device)
 *   "write_zeroes"  BLKZEROOUT on a device that advertises write zeroes
 *   "zero_pages"    BLKZEROOUT on a device that does not: the kernel writes zero pages
 *   "blkzeroout"    BLKZEROOUT, the device's answer not readable in sysfs */
static const char *zero_method(int fd)
{
    struct stat st;
    char p[256];
    uint64_t wz = 0;
    if (fstat(fd, &st) != 0) return "blkzeroout";
    if (blockdev_sysfs(st.st_rdev, "loop", p, sizeof p) == 0) return "writes";
    if (blockdev_sysfs(st.st_rdev, "queue/write_zeroes_max_bytes", p, sizeof p) != 0 || read_u64_file(p, &wz) != 0)
        return "blkzeroout";
    return wz ? "write_zeroes" : "zero_pages";
}

/* zero the working set: every byte prepare, a run or precondition can have written */
int dev_cleanup(const options_t *o, uint64_t *zeroed, const char **zeroed_by)
{
    *zeroed = 0;
    int fd = dev_open_fd(o, 1);
    if (fd < 0) return EXIT_ENV;
    uint64_t end = o->file_size;
    uint64_t range[2] = {g_io_base, end};
    int rc = 0;
    const char *how = zero_method(fd);
    if (!strcmp(how, "writes") || ioctl(fd, BLKZEROOUT, range) != 0) {   /* iobench writes the zeros */
        how = "writes";
        unsigned char *buf = chunk_buf();
        if (!buf) { close(fd); return EXIT_INTERNAL; }
        memset(buf, 0, DEV_CHUNK);
        for (uint64_t off = 0; off < end;) {
            size_t n = end - off < DEV_CHUNK ? (size_t)(end - off) : DEV_CHUNK;
            if (pwrite(fd, buf, n, (off_t)(off + g_io_base)) != (ssize_t)n) {
                err_msg("--device %s: cleanup could not zero offset %llu: %s", o->device, (unsigned long long)(off + g_io_base),
                        strerror(errno));
                rc = EXIT_IOERR;
                break;
            }
            off += n;
        }
        free(buf);
    }
    if (!rc && fsync(fd) != 0) { err_msg("--device %s: fsync: %s", o->device, strerror(errno)); rc = EXIT_IOERR; }
    close(fd);
    if (!rc) *zeroed = end;
    *zeroed_by = how;
    return rc;
}
