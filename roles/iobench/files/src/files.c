/* Safety checks, prepare and cleanup. Nothing here follows a symlink, and nothing but
 * test_file.N (N a plain decimal number), .iobench-marker and the dbpattern log ib_logfile.iobench
 * is ever written or removed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "iobench.h"

#define SPACE_MARGIN_FIXED (64ull << 20)   /* plus 5 % of the working set */

int env_check_dir(const options_t *o, envinfo_t *env)
{
    struct stat st;
    memset(env, 0, sizeof *env);
    if (stat(o->dir, &st) != 0) {
        if (errno == ENOENT)
            err_msg("--dir %s does not exist (create it first; iobench does not create directories)", o->dir);
        else
            err_msg("--dir %s: %s", o->dir, strerror(errno));
        return EXIT_ENV;
    }
    if (!S_ISDIR(st.st_mode)) {
        err_msg("--dir %s is not a directory", o->dir);
        return EXIT_ENV;
    }
    struct statfs sf;
    if (statfs(o->dir, &sf) == 0) {
        env->fs_type = (long)sf.f_type;
        snprintf(env->fs_name, sizeof env->fs_name, "%s", fs_type_name((long)sf.f_type));
        if (!strcmp(env->fs_name, "unknown"))
            snprintf(env->fs_name, sizeof env->fs_name, "0x%lx", (unsigned long)sf.f_type);
    } else {
        snprintf(env->fs_name, sizeof env->fs_name, "unknown");
    }
    env->logical_block_size = 512;
    char p[256];
    uint64_t lbs = 0;
    if (blockdev_sysfs(st.st_dev, "queue/logical_block_size", p, sizeof p) == 0 && read_u64_file(p, &lbs) == 0 &&
        lbs > 0 && lbs <= UINT32_MAX) {
        env->logical_block_size = (uint32_t)lbs;
        env->lbs_from_sysfs = 1;
    }
    if (gethostname(env->hostname, sizeof env->hostname - 1) != 0) snprintf(env->hostname, sizeof env->hostname, "unknown");
    struct utsname u;
    if (uname(&u) == 0) snprintf(env->kernel, sizeof env->kernel, "%s", u.release);
    return 0;
}

int check_marker(const char *dir, int required)
{
    (void)required;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, MARKER_NAME);
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISREG(st.st_mode)) return -1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[128] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < (ssize_t)strlen(MARKER_MAGIC)) return -1;
    return strncmp(buf, MARKER_MAGIC, strlen(MARKER_MAGIC)) == 0 ? 1 : -1;
}

static int marker_required(const options_t *o, const char *what)
{
    int m = check_marker(o->dir, 1);
    if (m == 1) return 0;
    if (m == 0)
        err_msg("--dir %s has no %s: it was not prepared by iobench; refusing to %s (run 'iobench prepare' first)",
                o->dir, MARKER_NAME, what);
    else
        err_msg("--dir %s: %s is not an iobench marker (not a regular file or wrong content); refusing to %s",
                o->dir, MARKER_NAME, what);
    return EXIT_ENV;
}

/* name is exactly test_file.N with N a decimal without leading zeros */
static int is_test_file_name(const char *n)
{
    size_t pl = strlen(FILE_PREFIX);
    if (strncmp(n, FILE_PREFIX, pl) != 0) return 0;
    const char *d = n + pl;
    if (!*d) return 0;
    if (d[0] == '0' && d[1]) return 0;
    size_t len = 0;
    for (; *d; d++, len++) if (*d < '0' || *d > '9') return 0;
    return len <= 9;
}

static int dir_fd_open(const options_t *o)
{
    int dfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) err_msg("--dir %s: cannot open: %s", o->dir, strerror(errno));
    return dfd;
}

int check_direct_support(const options_t *o, const envinfo_t *env, int for_prepare)
{
    if (!o->direct) return 0;
    (void)for_prepare;
    /* unnamed temporary file: leaves nothing behind even when the open fails */
    int fd = open(o->dir, O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
    if (fd >= 0) { close(fd); return 0; }
    if (errno == EINVAL) {
        err_msg("--direct: the filesystem of --dir %s (%s) refuses O_DIRECT; run without --direct (buffered I/O)",
                o->dir, env->fs_name);
        return EXIT_ENV;
    }
    return 0; /* O_TMPFILE unsupported or other issue: the real open will tell */
}

static void rlimit_files(uint64_t need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* .iobench-marker: created (create) or rewritten; stamped: prepare wrote the --verify header
 * in every 4 KiB of every file (verify.c) */
static int write_marker(const options_t *o, int dfd, int create, int stamped)
{
    int fd = openat(dfd, MARKER_NAME, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT | O_EXCL : O_TRUNC), 0600);
    if (fd < 0) {
        err_msg("--dir %s: cannot %s %s: %s", o->dir, create ? "create" : "rewrite", MARKER_NAME, strerror(errno));
        return EXIT_ENV;
    }
    char line[320];
    int n = snprintf(line, sizeof line, "%s\nfile_num=%llu\nfile_size=%llu\n%s", MARKER_MAGIC,
                     (unsigned long long)o->file_num, (unsigned long long)o->file_size, stamped ? MARKER_VERIFY "\n" : "");
    if (write(fd, line, (size_t)n) != n || fsync(fd) != 0) {
        err_msg("--dir %s: cannot write %s: %s", o->dir, MARKER_NAME, strerror(errno));
        close(fd);
        return EXIT_IOERR;
    }
    close(fd);
    return 0;
}

int do_prepare(const options_t *o, envinfo_t *env, prep_result_t *pr)
{
    memset(pr, 0, sizeof *pr);
    int m = check_marker(o->dir, 0);
    if (m < 0) {
        err_msg("--dir %s: %s exists but is not an iobench marker; refusing to prepare", o->dir, MARKER_NAME);
        return EXIT_ENV;
    }
    int dfd = dir_fd_open(o);
    if (dfd < 0) return EXIT_ENV;
    if (m == 0) {
        DIR *d = fdopendir(dup(dfd));
        if (!d) { err_msg("--dir %s: %s", o->dir, strerror(errno)); close(dfd); return EXIT_ENV; }
        struct dirent *de;
        char first[256] = "";
        int count = 0;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, "lost+found")) continue;
            if (!count) snprintf(first, sizeof first, "%s", de->d_name);
            count++;
        }
        closedir(d);
        if (count) {
            err_msg("--dir %s is not empty (%d entries, e.g. '%s') and has no %s; refusing to write into it "
                    "(use an empty directory)", o->dir, count, first, MARKER_NAME);
            close(dfd);
            return EXIT_ENV;
        }
    }
    struct statvfs vf;
    const char *why = NULL;
    if (statvfs(o->dir, &vf) == 0 && (vf.f_flag & ST_RDONLY)) why = "read-only filesystem";
    else if (access(o->dir, W_OK) != 0) why = strerror(errno);
    if (why) {
        err_msg("--dir %s is not writable: %s", o->dir, why);
        close(dfd);
        return EXIT_ENV;
    }
    /* existing test files must be regular files; their space is reused */
    uint64_t reusable = 0;
    char name[64];
    for (uint64_t i = 0; i < o->file_num; i++) {
        struct stat st;
        snprintf(name, sizeof name, FILE_PREFIX "%llu", (unsigned long long)i);
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (!S_ISREG(st.st_mode)) {
                err_msg("--dir %s: %s exists and is not a regular file (symlink?); refusing to touch it",
                        o->dir, name);
                close(dfd);
                return EXIT_ENV;
            }
            reusable += (uint64_t)st.st_blocks * 512;
        }
    }
    int rc = check_direct_support(o, env, 1);
    if (rc) { close(dfd); return rc; }
    uint64_t work = o->file_size * o->file_num;
    uint64_t need = work + work / 20 + SPACE_MARGIN_FIXED;
    /* f_blocks == 0: the filesystem reports no capacity (ramfs, some FUSE): no check */
    if (statvfs(o->dir, &vf) == 0 && vf.f_blocks > 0) {
        uint64_t avail = (uint64_t)vf.f_bavail * vf.f_frsize + reusable;
        if (avail < need) {
            err_msg("not enough free space in --dir %s: need %llu bytes (working set %llu + 5%% + 64 MiB margin), "
                    "available %llu bytes", o->dir, (unsigned long long)need, (unsigned long long)work,
                    (unsigned long long)avail);
            close(dfd);
            return EXIT_ENV;
        }
    }
    /* from here on we write; the marker says "stamped" (MARKER_VERIFY) only once every file is */
    int mrc = write_marker(o, dfd, m == 0, 0);
    if (mrc) { close(dfd); return mrc; }
    const size_t chunk = 1 << 20;
    unsigned char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, chunk) != 0) { close(dfd); return EXIT_INTERNAL; }
    uint64_t rs[4];
    rng_seed(rs, o->seed ^ 0x5052455041524500ull, 0xffff);
    uint64_t t0 = now_ns();
    int ret = 0;
    if (o->format == FMT_TEXT) fprintf(stderr, "%llu files, %llu KiB each, %llu MiB total\n",
        (unsigned long long)o->file_num, (unsigned long long)(o->file_size >> 10), (unsigned long long)(work >> 20));
    for (uint64_t i = 0; i < o->file_num && !ret; i++) {
        snprintf(name, sizeof name, FILE_PREFIX "%llu", (unsigned long long)i);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            err_msg("--dir %s: cannot create %s: %s", o->dir, name, strerror(errno));
            ret = errno == ELOOP ? EXIT_ENV : EXIT_IOERR;
            break;
        }
        uint64_t left = o->file_size, off = 0;
        while (left) {
            if (atomic_load_explicit(&g_stop, memory_order_relaxed)) { ret = EXIT_INTR; break; }
            size_t n = left < chunk ? (size_t)left : chunk;
            rng_fill(rs, buf, n);
            if (o->verify_on) verify_stamp(buf, n, (uint32_t)i, off, 0);
            ssize_t w = pwrite(fd, buf, n, (off_t)off);
            if (w < 0 && errno == EINTR) continue;
            if (w != (ssize_t)n) {
                errlog_add("prepare write", (int)i, off, w < 0 ? errno : 0);
                err_msg("prepare: writing %s/%s at offset %llu failed: %s", o->dir, name,
                        (unsigned long long)off, w < 0 ? strerror(errno) : "short write");
                ret = EXIT_IOERR;
                break;
            }
            off += n; left -= n;
            pr->bytes += n;
        }
        if (!ret && fsync(fd) != 0) {
            err_msg("prepare: fsync %s/%s failed: %s", o->dir, name, strerror(errno));
            ret = EXIT_IOERR;
        }
        close(fd);
        if (!ret) pr->files++;
    }
    if (!ret && o->verify_on) ret = write_marker(o, dfd, 0, 1);
    if (!ret) fsync(dfd);
    free(buf);
    close(dfd);
    pr->elapsed_s = (double)(now_ns() - t0) / 1e9;
    pr->mib_per_sec = pr->elapsed_s > 0 ? (double)pr->bytes / 1048576.0 / pr->elapsed_s : 0;
    pr->done = 1;
    return ret;
}

int do_cleanup(const options_t *o, uint64_t *removed)
{
    *removed = 0;
    int rc = marker_required(o, "clean up");
    if (rc) return rc;
    int dfd = dir_fd_open(o);
    if (dfd < 0) return EXIT_ENV;
    DIR *d = fdopendir(dup(dfd));
    if (!d) { close(dfd); return EXIT_ENV; }
    size_t cap = 256, n = 0;
    char **names = malloc(cap * sizeof *names);
    struct dirent *de;
    rc = 0;
    while ((de = readdir(d))) {
        if (!is_test_file_name(de->d_name)) continue;
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISREG(st.st_mode)) {
            err_msg("--dir %s: %s is not a regular file (symlink?); refusing to clean up, nothing removed",
                    o->dir, de->d_name);
            rc = EXIT_ENV;
            break;
        }
        if (n == cap) { cap *= 2; names = realloc(names, cap * sizeof *names); }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (!rc) {   /* the dbpattern redo log, ib_logfile.iobench, is ours too */
        struct stat st;
        if (fstatat(dfd, DB_LOG_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (!S_ISREG(st.st_mode)) {
                err_msg("--dir %s: %s is not a regular file (symlink?); refusing to clean up, nothing removed",
                        o->dir, DB_LOG_NAME);
                rc = EXIT_ENV;
            } else {
                if (n == cap) { cap *= 2; names = realloc(names, cap * sizeof *names); }
                names[n++] = strdup(DB_LOG_NAME);
            }
        }
    }
    if (!rc) {
        for (size_t i = 0; i < n; i++) {
            if (unlinkat(dfd, names[i], 0) == 0) (*removed)++;
            else if (errno != ENOENT) { err_msg("cleanup: cannot remove %s/%s: %s", o->dir, names[i], strerror(errno)); rc = EXIT_ENV; }
        }
        if (!rc && unlinkat(dfd, MARKER_NAME, 0) != 0 && errno != ENOENT) {
            err_msg("cleanup: cannot remove %s/%s: %s", o->dir, MARKER_NAME, strerror(errno));
            rc = EXIT_ENV;
        }
        fsync(dfd);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    close(dfd);
    return rc;
}

int open_test_files(const options_t *o, int **fds_out)
{
    int rc = marker_required(o, "run");
    if (rc) return rc;
    rlimit_files(o->file_num);
    int *fds = malloc(o->file_num * sizeof *fds);
    if (!fds) return EXIT_INTERNAL;
    for (uint64_t i = 0; i < o->file_num; i++) fds[i] = -1;
    int dfd = dir_fd_open(o);
    if (dfd < 0) { free(fds); return EXIT_ENV; }
    int acc = (o->mode == MODE_SEQRD || o->mode == MODE_RNDRD) ? O_RDONLY : O_RDWR;
    int flags = acc | O_NOFOLLOW | O_CLOEXEC;
    if (o->direct) flags |= O_DIRECT;
    if (o->open_sync) flags |= O_SYNC;
    if (o->open_dsync) flags |= O_DSYNC;
    char name[64];
    for (uint64_t i = 0; i < o->file_num; i++) {
        snprintf(name, sizeof name, FILE_PREFIX "%llu", (unsigned long long)i);
        int fd = openat(dfd, name, flags);
        if (fd < 0) {
            int e = errno;
            if (e == ENOENT)
                err_msg("--dir %s: %s is missing (--file-num %llu); run 'iobench prepare' with the same --file-num/--total-size",
                        o->dir, name, (unsigned long long)o->file_num);
            else if (e == ELOOP)
                err_msg("--dir %s: %s is a symlink; refusing to follow it", o->dir, name);
            else if (e == EINVAL && o->direct) {
                struct statfs sf;
                const char *fs = fstatfs(dfd, &sf) == 0 ? fs_type_name((long)sf.f_type) : "unknown";
                err_msg("--direct: the filesystem of --dir %s (%s) refuses O_DIRECT; run without --direct (buffered I/O)",
                        o->dir, fs);
            } else if (e == EMFILE || e == ENFILE)
                err_msg("--file-num %llu: too many open files (%s); raise 'ulimit -n' or use fewer files",
                        (unsigned long long)o->file_num, strerror(e));
            else
                err_msg("--dir %s: cannot open %s: %s", o->dir, name, strerror(e));
            rc = EXIT_ENV;
            break;
        }
        fds[i] = fd;
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            err_msg("--dir %s: %s is not a regular file; refusing", o->dir, name);
            rc = EXIT_ENV;
            break;
        }
        if ((uint64_t)st.st_size < o->file_size) {
            err_msg("--dir %s: %s is %llu bytes, expected %llu (--total-size/--file-num); run 'iobench prepare' again",
                    o->dir, name, (unsigned long long)st.st_size, (unsigned long long)o->file_size);
            rc = EXIT_ENV;
            break;
        }
    }
    close(dfd);
    if (rc) { close_test_files(o, fds); return rc; }
    *fds_out = fds;
    return 0;
}

void close_test_files(const options_t *o, int *fds)
{
    if (!fds) return;
    for (uint64_t i = 0; i < o->file_num; i++) if (fds[i] >= 0) close(fds[i]);
    free(fds);
}

int drop_cache(const options_t *o, int *fds)
{
    for (uint64_t i = 0; i < o->file_num; i++) {
        fdatasync(fds[i]);
        posix_fadvise(fds[i], 0, 0, POSIX_FADV_DONTNEED);
    }
    return 1;
}
