/* --devstat DEV[,DEV...]: the block layer's own counters of each named device, read at the
 * measured window's start and end instants (run_bench), so the device's reads, writes,
 * bytes, busy time and queue time over exactly the window are end - start.
 * Source: /sys/block/<dev>/stat, for a partition /sys/class/block/<dev>/stat ("sysfs");
 * else the device's line of /proc/diskstats ("diskstats"). The fields are the kernel's
 * (Documentation/block/stat.rst): reads, reads merged, sectors read, ms reading, writes,
 * writes merged, sectors written, ms writing, in flight, ms busy, weighted ms, then
 * discards (4 fields) and flushes (2 fields) on newer kernels; sectors are 512 bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "iobench.h"

static int parse_fields(const char *s, uint64_t *v)
{
    int n = 0;
    while (n < DEVSTAT_FIELDS) {
        char *end;
        while (*s == ' ' || *s == '\t') s++;
        if (*s < '0' || *s > '9') break;
        errno = 0;
        unsigned long long x = strtoull(s, &end, 10);
        if (errno || end == s) break;
        v[n++] = x;
        s = end;
    }
    return n;
}

static int read_sysfs(const char *path, uint64_t *v)
{
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char line[512];
    int n = fgets(line, sizeof line, f) ? parse_fields(line, v) : 0;
    fclose(f);
    return n;
}

static int read_diskstats(const char *name, uint64_t *v)
{
    FILE *f = fopen("/proc/diskstats", "re");
    if (!f) return -1;
    char line[512];
    int n = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned maj, min;
        char dev[DEVSTAT_NAME];
        int off = 0;
        if (sscanf(line, "%u %u %63s %n", &maj, &min, dev, &off) < 3 || strcmp(dev, name) != 0) continue;
        n = parse_fields(line + off, v);
        break;
    }
    fclose(f);
    return n;
}

/* one reading of one device: number of fields (>= 11) or -1; *source set */
static int read_dev(const char *name, uint64_t *v, const char **source)
{
    char p[160];
    snprintf(p, sizeof p, "/sys/block/%s/stat", name);
    int n = read_sysfs(p, v);
    if (n < 0) {
        snprintf(p, sizeof p, "/sys/class/block/%s/stat", name);
        n = read_sysfs(p, v);
    }
    if (n >= 11) { *source = "sysfs"; return n; }
    n = read_diskstats(name, v);
    if (n >= 11) { *source = "diskstats"; return n; }
    return -1;
}

void devstat_sample(const options_t *o, devstat_t *ds, int end)
{
    if (!end) { memset(ds, 0, sizeof *ds); ds->n = o->devstat_n; }
    for (int i = 0; i < o->devstat_n; i++) {
        devstat_dev_t *d = &ds->d[i];
        const char *src = NULL;
        uint64_t *v = end ? d->end : d->start;
        int n = read_dev(o->devstat[i], v, &src);
        if (!end) {
            snprintf(d->name, sizeof d->name, "%s", o->devstat[i]);
            d->ok = n >= 11;
            d->nfields = n;
            d->source = src;
        } else if (d->ok) {
            d->ok = n >= 11 && src == d->source;
            if (n < d->nfields) d->nfields = n;
        }
        if (n < 11 && !ds->err[0])
            snprintf(ds->err, sizeof ds->err, "%s: no counters in /sys/block/%s/stat, /sys/class/block/%s/stat "
                     "or /proc/diskstats at the window %s", o->devstat[i], o->devstat[i], o->devstat[i],
                     end ? "end" : "start");
    }
}
