/* Small helpers: wall clock, filesystem and errno names, error messages. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "iobench.h"

/* The sysfs path of attribute `rel` of block device `dev` into `out`: the device's own
 * (/sys/dev/block/M:m/rel), else its disk's for a partition (/sys/dev/block/M:m/../rel).
 * 0 when one exists, -1 when neither does. */
int blockdev_sysfs(dev_t dev, const char *rel, char *out, size_t n)
{
    if (!out || !n) return -1;
    snprintf(out, n, "/sys/dev/block/%u:%u/%s", major(dev), minor(dev), rel);
    if (access(out, F_OK) == 0) return 0;
    snprintf(out, n, "/sys/dev/block/%u:%u/../%s", major(dev), minor(dev), rel);
    return access(out, F_OK) == 0 ? 0 : -1;
}

/* One unsigned number from a sysfs file: 0 when read, -1 when missing or not a number. */
int read_u64_file(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    unsigned long long v = 0;
    int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (!ok) return -1;
    *out = (uint64_t)v;
    return 0;
}

double epoch_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One line on stderr, formatted whole first so concurrent threads do not interleave. */
static void verr(const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    fprintf(stderr, "iobench: error: %s\n", buf);
}

void err_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(fmt, ap);
    va_end(ap);
}

void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(fmt, ap);
    va_end(ap);
    exit(EXIT_USAGE);
}

const char *fs_type_name(long t)
{
    switch ((unsigned long)t & 0xffffffffUL) {
    case 0xEF53: return "ext4";           /* ext2/3/4 share the magic */
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x858458f6: return "ramfs";
    case 0x794c7630: return "overlay";
    case 0x65735546: return "fuse";
    case 0x6969: return "nfs";
    case 0xFF534D42: return "cifs";
    case 0xFE534D42: return "smb2";
    case 0x2FC12FC1: return "zfs";
    case 0xF2F52010: return "f2fs";
    case 0x4d44: return "vfat";
    case 0x5346544e: return "ntfs";
    case 0x7366746e: return "ntfs3";
    case 0x73717368: return "squashfs";
    case 0x9fa0: return "proc";
    case 0x62656572: return "sysfs";
    case 0x00c36400: return "ceph";
    case 0x47504653: return "gpfs";
    case 0x0BD00BD0: return "lustre";
    case 0x01021997: return "9p";
    case 0x6a656a63: return "fakeowner";
    case 0x3153464a: return "jfs";
    case 0x52654973: return "reiserfs";
    case 0x27e0eb: return "cgroup";
    case 0x64626720: return "debugfs";
    default: return "unknown";
    }
}

const char *errno_name(int e)
{
    switch (e) {
#define E(x) case x: return #x;
    E(EPERM) E(ENOENT) E(ESRCH) E(EINTR) E(EIO) E(ENXIO) E(E2BIG) E(ENOEXEC) E(EBADF)
    E(ECHILD) E(EAGAIN) E(ENOMEM) E(EACCES) E(EFAULT) E(EBUSY) E(EEXIST) E(EXDEV)
    E(ENODEV) E(ENOTDIR) E(EISDIR) E(EINVAL) E(ENFILE) E(EMFILE) E(ETXTBSY) E(EFBIG)
    E(ENOSPC) E(ESPIPE) E(EROFS) E(EMLINK) E(EPIPE) E(ERANGE) E(ENAMETOOLONG) E(ENOSYS)
    E(ELOOP) E(EOVERFLOW) E(EOPNOTSUPP) E(ETIMEDOUT) E(ESTALE) E(EDQUOT) E(ECANCELED)
    E(ENOLINK) E(EREMOTEIO) E(ENOMEDIUM) E(EMEDIUMTYPE) E(EBADMSG) E(ENODATA) E(ENOTCONN)
    E(ECONNRESET) E(EHOSTDOWN) E(EILSEQ) E(EUCLEAN) E(ENOTRECOVERABLE)
#undef E
    default: return NULL;
    }
}

const char *err_kind_name(int k)
{
    static char buf[ERR_KINDS][16];
    if (k == ERR_SHORT_READ) return "SHORT_READ";
    if (k == ERR_SHORT_WRITE) return "SHORT_WRITE";
    if (k == ERR_OTHER) return "OTHER";
    const char *n = errno_name(k);
    if (n) return n;
    if (k >= 0 && k < ERR_KINDS) {
        if (!buf[k][0]) snprintf(buf[k], sizeof buf[k], "ERRNO_%d", k);
        return buf[k];
    }
    return "OTHER";
}
