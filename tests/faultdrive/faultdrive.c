/*
 * faultdrive - a block device that fails on purpose, for the tests (docs/testing.md,
 * "The fault-injecting drive").
 *
 * A FUSE filesystem (libfuse3, high-level API, multithreaded) that serves two files:
 *   /<file>    (default "disk") the data of a real backing file, opened with direct_io so
 *              every read and write reaches this program (no FUSE page cache); the tests
 *              put it under a loop device (losetup --direct-io=on);
 *   /control   write flat JSON objects, one a line, to add or clear fault rules (a write
 *              is one batch: all its lines apply together, or none and the write fails
 *              with EINVAL); read it for the drive's counters and the active rules with
 *              the number of requests each rule hit.
 *
 * Rule kinds: eio, flip, misplace, drop, delay, stall, vanish (fields in the doc page).
 * Every decision about a request is taken under one mutex from a snapshot of the rules;
 * the I/O on the backing file and the waits happen outside it.
 *
 * Usage: faultdrive --backing=PATH [--file=NAME] MOUNTPOINT -f [-o fuse options]
 */
#define FUSE_USE_VERSION 312
#define _GNU_SOURCE
#include <fuse.h>
#include <fuse_lowlevel.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SECTOR 512u
#define MAX_RULES 64
#define MAX_LINE 4096
#define WAIT_SLICE_NS 100000000LL /* re-check the rules and the session every 100 ms */

enum kind { K_EIO, K_FLIP, K_MISPLACE, K_DROP, K_DELAY, K_STALL, K_VANISH, K_COUNT };
static const char *const kind_names[K_COUNT] = {
	"eio", "flip", "misplace", "drop", "delay", "stall", "vanish"
};
enum { OP_READ = 1, OP_WRITE = 2, OP_BOTH = 3 };

struct rule {
	uint64_t id;
	enum kind kind;
	uint64_t start, length; /* length 0: to the end of the drive */
	int ops;
	double at_s;            /* active from at_s seconds after it was set */
	uint64_t max_hits;      /* 0: unlimited */
	/* kind-specific */
	uint64_t every, seed;   /* flip */
	int64_t shift;          /* misplace (from_offset: the source of start, turned into shift) */
	uint64_t from_offset;
	int rewrites_only;      /* drop */
	int since_start;        /* drop: the drive-wide bitmap instead of the rule's own */
	uint8_t *bitmap;        /* drop, rewrites_only, since the rule: one bit per sector of the region */
	double ms;              /* delay */
	double every_s, for_s;  /* stall */
	/* state */
	double set_at;          /* monotonic seconds */
	uint64_t hits, bytes;
};

static struct {
	int fd;
	uint64_t size;
	const char *file;
	char path[256];
	double started;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct rule rules[MAX_RULES];
	int nrules;
	uint64_t next_id, generation;
	uint8_t *written; /* one bit per sector written since the drive started */
	uint64_t reads, writes, read_bytes, write_bytes, errors, syncs;
	char last_error[512];
	struct fuse *fuse;
} g = { .fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1 };

/* ---------- small helpers ---------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wait (holding g.lock, which the wait releases) until `deadline` or a rule change. */
static void timed_wait_locked(double deadline)
{
	struct timespec ts;
	double until = deadline, cap = now_s() + (double)WAIT_SLICE_NS / 1e9;
	if (until > cap)
		until = cap;
	ts.tv_sec = (time_t)until;
	ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_nsec = 999999999L;
	pthread_cond_timedwait(&g.changed, &g.lock, &ts);
}

/* Holding g.lock: one slice of a wait until `deadline`; 1 when the daemon is stopping (then
 * every wait ends, so the session's threads can be joined). */
static int wait_locked(double deadline)
{
	if (g.fuse && fuse_session_exited(fuse_get_session(g.fuse)))
		return 1;
	timed_wait_locked(deadline);
	return 0;
}

/* SplitMix64 finaliser: the flipped bit of chunk c (mirrored in tests/faultdrive/__init__.py). */
static uint64_t mix64(uint64_t c, uint64_t seed)
{
	uint64_t z = c + (seed + 1) * 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t rule_end(const struct rule *r)
{
	return r->length ? r->start + r->length : g.size;
}

/* Overlap of the request [off, off+len) with the rule's region, as [*lo, *hi). */
static int overlap(const struct rule *r, uint64_t off, uint64_t len, uint64_t *lo, uint64_t *hi)
{
	uint64_t a = off > r->start ? off : r->start;
	uint64_t e = rule_end(r), b = off + len < e ? off + len : e;
	if (a >= b)
		return 0;
	*lo = a;
	*hi = b;
	return 1;
}

static int active(const struct rule *r, double now)
{
	return now >= r->set_at + r->at_s && (r->max_hits == 0 || r->hits < r->max_hits);
}

static int bit_test(const uint8_t *bm, uint64_t i) { return (bm[i >> 3] >> (i & 7)) & 1; }
static void bit_set(uint8_t *bm, uint64_t i) { bm[i >> 3] |= (uint8_t)(1u << (i & 7)); }

/* ---------- a growing string ---------- */

struct sbuf { char *p; size_t len, cap; };

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = b->cap - b->len;
		int n;
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 1024;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return;
		b->p = p;
		b->cap = cap;
	}
}

/* ---------- the control format: flat JSON objects ---------- */

struct field { char key[32]; char str[128]; double num; int64_t inum; int is_str, is_int, is_bool; };

static const char *skip_ws(const char *s)
{
	while (*s && isspace((unsigned char)*s))
		s++;
	return s;
}

/* Parse one flat JSON object into fields; returns the count or -1 with err set. */
static int parse_object(const char *s, struct field *f, int maxf, char *err, size_t errlen)
{
	int n = 0;
	s = skip_ws(s);
	if (*s != '{') {
		snprintf(err, errlen, "expected a JSON object '{...}'");
		return -1;
	}
	s = skip_ws(s + 1);
	if (*s == '}')
		return *skip_ws(s + 1) ? (snprintf(err, errlen, "text after the object"), -1) : 0;
	for (;;) {
		struct field *x;
		size_t k = 0;
		if (n == maxf) {
			snprintf(err, errlen, "too many keys (at most %d)", maxf);
			return -1;
		}
		x = &f[n];
		memset(x, 0, sizeof(*x));
		if (*s != '"') {
			snprintf(err, errlen, "expected a quoted key");
			return -1;
		}
		for (s++; *s && *s != '"'; s++)
			if (k + 1 < sizeof(x->key))
				x->key[k++] = *s;
		if (*s != '"') {
			snprintf(err, errlen, "unterminated key");
			return -1;
		}
		s = skip_ws(s + 1);
		if (*s != ':') {
			snprintf(err, errlen, "expected ':' after key '%.63s'", x->key);
			return -1;
		}
		s = skip_ws(s + 1);
		if (*s == '"') {
			k = 0;
			x->is_str = 1;
			for (s++; *s && *s != '"'; s++) {
				if (*s == '\\' && s[1])
					s++;
				if (k + 1 < sizeof(x->str))
					x->str[k++] = *s;
			}
			if (*s != '"') {
				snprintf(err, errlen, "unterminated string for '%.63s'", x->key);
				return -1;
			}
			s++;
		} else if (!strncmp(s, "true", 4) || !strncmp(s, "false", 5)) {
			x->is_bool = 1;
			x->inum = *s == 't';
			x->num = (double)x->inum;
			s += *s == 't' ? 4 : 5;
		} else {
			char *end;
			errno = 0;
			x->num = strtod(s, &end);
			if (end == s || errno) {
				snprintf(err, errlen, "bad value for '%.63s' (a number, string, true or false)", x->key);
				return -1;
			}
			const char *e2 = s;
			if (*e2 == '-')
				e2++;
			while (isdigit((unsigned char)*e2))
				e2++;
			if (e2 == end) { /* an integer: keep it exact */
				errno = 0;
				x->inum = strtoll(s, NULL, 10);
				x->is_int = errno == 0;
				if (!x->is_int) {
					snprintf(err, errlen, "integer out of range for '%.63s'", x->key);
					return -1;
				}
			}
			s = end;
		}
		n++;
		s = skip_ws(s);
		if (*s == ',') {
			s = skip_ws(s + 1);
			continue;
		}
		if (*s == '}') {
			if (*skip_ws(s + 1)) {
				snprintf(err, errlen, "text after the object");
				return -1;
			}
			return n;
		}
		snprintf(err, errlen, "expected ',' or '}' after '%.63s'", x->key);
		return -1;
	}
}

static int want_uint(const struct field *x, uint64_t *out, char *err, size_t errlen)
{
	if (!x->is_int || x->inum < 0) {
		snprintf(err, errlen, "'%.63s' must be an integer >= 0", x->key);
		return -1;
	}
	*out = (uint64_t)x->inum;
	return 0;
}

static int want_num(const struct field *x, double *out, char *err, size_t errlen)
{
	if (x->is_str || x->is_bool || x->num < 0) {
		snprintf(err, errlen, "'%.63s' must be a number >= 0", x->key);
		return -1;
	}
	*out = x->num;
	return 0;
}

/* Keys each kind accepts beyond the common ones (kind, op, start, length, ops, at_s, max_hits). */
static const char *const kind_keys[K_COUNT] = {
	"", "every seed", "shift from_offset", "rewrites_only since", "ms", "every_s for_s", ""
};

static int key_allowed(enum kind k, const char *key)
{
	static const char *const common[] = { "op", "kind", "start", "length", "ops", "at_s", "max_hits" };
	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
		if (!strcmp(key, common[i]))
			return 1;
	const char *p = kind_keys[k];
	size_t kl = strlen(key);
	while (*p) {
		const char *sp = strchr(p, ' ');
		size_t len = sp ? (size_t)(sp - p) : strlen(p);
		if (len == kl && !strncmp(p, key, len))
			return 1;
		if (!sp)
			break;
		p = sp + 1;
	}
	return 0;
}

/* The numeric keys of a rule: where each is stored, an integer >= 0 ('u') or a number >= 0 ('n'). */
static const struct numkey { const char *key; char type; size_t off; } num_keys[] = {
	{ "start", 'u', offsetof(struct rule, start) },
	{ "length", 'u', offsetof(struct rule, length) },
	{ "max_hits", 'u', offsetof(struct rule, max_hits) },
	{ "seed", 'u', offsetof(struct rule, seed) },
	{ "every", 'u', offsetof(struct rule, every) },
	{ "from_offset", 'u', offsetof(struct rule, from_offset) },
	{ "at_s", 'n', offsetof(struct rule, at_s) },
	{ "ms", 'n', offsetof(struct rule, ms) },
	{ "every_s", 'n', offsetof(struct rule, every_s) },
	{ "for_s", 'n', offsetof(struct rule, for_s) },
};

static int has_key(const struct field *f, int n, const char *key)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(f[i].key, key))
			return 1;
	return 0;
}

/* Build a rule from fields; 0 or -1 with err. */
static int make_rule(const struct field *f, int n, struct rule *r, char *err, size_t errlen)
{
	const struct field *kindf = NULL;
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < n; i++)
		if (!strcmp(f[i].key, "kind"))
			kindf = &f[i];
	if (!kindf || !kindf->is_str) {
		snprintf(err, errlen, "a rule needs \"kind\" (eio, flip, misplace, drop, delay, stall, vanish)");
		return -1;
	}
	r->kind = K_COUNT;
	for (int k = 0; k < K_COUNT; k++)
		if (!strcmp(kindf->str, kind_names[k]))
			r->kind = (enum kind)k;
	if (r->kind == K_COUNT) {
		snprintf(err, errlen, "unknown kind '%.63s' (eio, flip, misplace, drop, delay, stall, vanish)", kindf->str);
		return -1;
	}
	r->ops = r->kind == K_FLIP || r->kind == K_MISPLACE ? OP_READ : r->kind == K_DROP ? OP_WRITE : OP_BOTH;
	r->every = SECTOR;
	for (int i = 0; i < n; i++) {
		const struct field *x = &f[i];
		const struct numkey *nk = NULL;
		if (!key_allowed(r->kind, x->key)) {
			snprintf(err, errlen, "unknown key '%.63s' for kind %s", x->key, kind_names[r->kind]);
			return -1;
		}
		for (size_t j = 0; j < sizeof(num_keys) / sizeof(num_keys[0]); j++)
			if (!strcmp(x->key, num_keys[j].key))
				nk = &num_keys[j];
		if (nk) {
			if (nk->type == 'u' ? want_uint(x, (uint64_t *)((char *)r + nk->off), err, errlen)
					    : want_num(x, (double *)((char *)r + nk->off), err, errlen))
				return -1;
		} else if (!strcmp(x->key, "shift")) {
			if (!x->is_int) {
				snprintf(err, errlen, "'shift' must be an integer (bytes, may be negative)");
				return -1;
			}
			r->shift = x->inum;
		} else if (!strcmp(x->key, "rewrites_only")) {
			if (!x->is_bool) {
				snprintf(err, errlen, "'rewrites_only' must be true or false");
				return -1;
			}
			r->rewrites_only = (int)x->inum;
		} else if (!strcmp(x->key, "since")) {
			if (!x->is_str || (strcmp(x->str, "rule") && strcmp(x->str, "start"))) {
				snprintf(err, errlen, "'since' must be \"rule\" or \"start\"");
				return -1;
			}
			r->since_start = !strcmp(x->str, "start");
		} else if (!strcmp(x->key, "ops")) {
			r->ops = !x->is_str ? 0 : !strcmp(x->str, "read") ? OP_READ : !strcmp(x->str, "write") ? OP_WRITE
				: !strcmp(x->str, "both") ? OP_BOTH : 0;
			if (!r->ops) {
				snprintf(err, errlen, "'ops' must be \"read\", \"write\" or \"both\"");
				return -1;
			}
		}
	}
	if (r->every == 0 || r->every > (1u << 20)) {
		snprintf(err, errlen, "'every' must be 1 .. 1048576 bytes");
		return -1;
	}
	if (r->start > g.size || rule_end(r) > g.size) {
		snprintf(err, errlen, "region [%" PRIu64 ", %" PRIu64 ") is beyond the drive's %" PRIu64 " bytes",
			 r->start, rule_end(r), g.size);
		return -1;
	}
	if (r->length == 0 && r->start == g.size) {
		snprintf(err, errlen, "region starts at the drive's end (%" PRIu64 ")", g.size);
		return -1;
	}
	if (has_key(f, n, "ops") && (((r->kind == K_FLIP || r->kind == K_MISPLACE) && r->ops != OP_READ) ||
			(r->kind == K_DROP && r->ops != OP_WRITE))) {
		snprintf(err, errlen, "kind %s acts on %s only", kind_names[r->kind], r->kind == K_DROP ? "write" : "read");
		return -1;
	}
	switch (r->kind) {
	case K_MISPLACE:
		if (has_key(f, n, "shift") == has_key(f, n, "from_offset")) {
			snprintf(err, errlen, "misplace needs exactly one of 'shift' or 'from_offset'");
			return -1;
		}
		if (has_key(f, n, "from_offset"))
			r->shift = (int64_t)r->from_offset - (int64_t)r->start;
		if (r->shift == 0 || (int64_t)r->start + r->shift < 0 ||
		    (int64_t)rule_end(r) + r->shift > (int64_t)g.size) {
			snprintf(err, errlen, "misplace source [%" PRId64 ", %" PRId64 ") must be another region inside the drive",
				 (int64_t)r->start + r->shift, (int64_t)rule_end(r) + r->shift);
			return -1;
		}
		break;
	case K_DROP:
		if (r->start % SECTOR || rule_end(r) % SECTOR) {
			snprintf(err, errlen, "drop region must be whole %u-byte sectors", SECTOR);
			return -1;
		}
		if (has_key(f, n, "since") && !r->rewrites_only) {
			snprintf(err, errlen, "'since' needs 'rewrites_only': true");
			return -1;
		}
		break;
	case K_DELAY:
		if (r->ms <= 0) {
			snprintf(err, errlen, "delay needs 'ms' > 0");
			return -1;
		}
		break;
	case K_STALL:
		if (r->for_s <= 0) {
			snprintf(err, errlen, "stall needs 'for_s' > 0");
			return -1;
		}
		if (r->every_s > 0 && r->for_s >= r->every_s) {
			snprintf(err, errlen, "stall needs 'for_s' < 'every_s' (or every_s 0: one stall)");
			return -1;
		}
		break;
	default:
		break;
	}
	return 0;
}

static void free_rule(struct rule *r)
{
	free(r->bitmap);
	r->bitmap = NULL;
}

/* Apply one control write: lines of JSON objects, all or none. Returns 0 or -EINVAL. */
static int control_apply(const char *text, size_t len)
{
	struct rule add[MAX_RULES];
	int nadd = 0, clear = 0, nremove = 0;
	uint64_t remove_ids[MAX_RULES];
	char err[400] = "", line[MAX_LINE];
	size_t pos = 0;
	int lineno = 0, rc = 0;

	while (pos < len && !rc) {
		size_t e = pos;
		while (e < len && text[e] != '\n')
			e++;
		lineno++;
		if (e - pos >= sizeof(line)) {
			snprintf(err, sizeof(err), "line longer than %d bytes", MAX_LINE - 1);
			rc = -EINVAL;
			break;
		}
		memcpy(line, text + pos, e - pos);
		line[e - pos] = 0;
		pos = e + 1;
		if (!*skip_ws(line))
			continue;
		struct field f[24];
		int n = parse_object(line, f, 24, err, sizeof(err));
		const char *op = "add";
		if (n < 0) {
			rc = -EINVAL;
			break;
		}
		for (int i = 0; i < n; i++)
			if (!strcmp(f[i].key, "op"))
				op = f[i].is_str ? f[i].str : "?";
		if (!strcmp(op, "clear")) {
			if (n != 1) {
				snprintf(err, sizeof(err), "\"op\": \"clear\" takes no other key");
				rc = -EINVAL;
			}
			clear = 1;
			nadd = 0; /* rules added before a clear in the same batch are cleared too */
			nremove = 0;
		} else if (!strcmp(op, "remove")) {
			const struct field *idf = NULL;
			for (int i = 0; i < n; i++)
				if (!strcmp(f[i].key, "id") && f[i].is_int && f[i].inum > 0)
					idf = &f[i];
			if (n != 2 || !idf) {
				snprintf(err, sizeof(err), "\"op\": \"remove\" takes one integer \"id\" > 0");
				rc = -EINVAL;
			} else if (nremove < MAX_RULES) {
				remove_ids[nremove++] = (uint64_t)idf->inum;
			}
		} else if (!strcmp(op, "add")) {
			if (nadd == MAX_RULES) {
				snprintf(err, sizeof(err), "at most %d rules", MAX_RULES);
				rc = -EINVAL;
			} else if (make_rule(f, n, &add[nadd], err, sizeof(err))) {
				rc = -EINVAL;
			} else {
				nadd++;
			}
		} else {
			snprintf(err, sizeof(err), "unknown op '%.63s' (add, clear, remove)", op);
			rc = -EINVAL;
		}
	}
	pthread_mutex_lock(&g.lock);
	if (rc) {
		snprintf(g.last_error, sizeof(g.last_error), "line %d: %s", lineno, err);
		pthread_mutex_unlock(&g.lock);
		return rc;
	}
	int kept = clear ? 0 : g.nrules;
	if (clear)
		for (int i = 0; i < g.nrules; i++)
			free_rule(&g.rules[i]);
	for (int j = 0; j < nremove; j++)
		for (int i = 0; i < kept; i++)
			if (g.rules[i].id == remove_ids[j]) {
				free_rule(&g.rules[i]);
				memmove(&g.rules[i], &g.rules[i + 1], (size_t)(kept - i - 1) * sizeof(g.rules[0]));
				kept--;
				break;
			}
	if (kept + nadd > MAX_RULES) {
		g.nrules = kept;
		snprintf(g.last_error, sizeof(g.last_error), "at most %d rules (have %d, adding %d)", MAX_RULES, kept, nadd);
		pthread_mutex_unlock(&g.lock);
		return -EINVAL;
	}
	double t = now_s();
	for (int i = 0; i < nadd; i++) {
		struct rule *r = &add[i];
		r->id = g.next_id++;
		r->set_at = t;
		if (r->kind == K_DROP && r->rewrites_only && !r->since_start) {
			uint64_t bits = (rule_end(r) - r->start) / SECTOR;
			r->bitmap = calloc(bits / 8 + 1, 1);
			if (!r->bitmap) {
				snprintf(g.last_error, sizeof(g.last_error), "out of memory for a drop bitmap");
				g.nrules = kept + i;
				pthread_mutex_unlock(&g.lock);
				return -ENOMEM;
			}
		}
		g.rules[kept + i] = *r;
	}
	g.nrules = kept + nadd;
	g.generation++;
	g.last_error[0] = 0;
	pthread_cond_broadcast(&g.changed);
	pthread_mutex_unlock(&g.lock);
	return 0;
}

static char *control_render(size_t *len)
{
	struct sbuf b = { 0 };
	double t = now_s();
	pthread_mutex_lock(&g.lock);
	sb_printf(&b, "{\"size\": %" PRIu64 ", \"sector\": %u, \"uptime_s\": %.3f, \"generation\": %" PRIu64
		  ", \"reads\": %" PRIu64 ", \"writes\": %" PRIu64 ", \"read_bytes\": %" PRIu64
		  ", \"write_bytes\": %" PRIu64 ", \"errors\": %" PRIu64 ", \"syncs\": %" PRIu64 ", \"last_error\": \"",
		  g.size, SECTOR, t - g.started, g.generation, g.reads, g.writes, g.read_bytes, g.write_bytes,
		  g.errors, g.syncs);
	for (const char *p = g.last_error; *p; p++)
		sb_printf(&b, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
	sb_printf(&b, "\", \"rules\": [");
	for (int i = 0; i < g.nrules; i++) {
		const struct rule *r = &g.rules[i];
		sb_printf(&b, "%s\n  {\"id\": %" PRIu64 ", \"kind\": \"%s\", \"start\": %" PRIu64 ", \"length\": %" PRIu64
			  ", \"ops\": \"%s\", \"at_s\": %g, \"max_hits\": %" PRIu64,
			  i ? "," : "", r->id, kind_names[r->kind], r->start, r->length,
			  r->ops == OP_READ ? "read" : r->ops == OP_WRITE ? "write" : "both", r->at_s, r->max_hits);
		switch (r->kind) {
		case K_FLIP:
			sb_printf(&b, ", \"every\": %" PRIu64 ", \"seed\": %" PRIu64, r->every, r->seed);
			break;
		case K_MISPLACE:
			sb_printf(&b, ", \"shift\": %" PRId64, r->shift);
			break;
		case K_DROP:
			sb_printf(&b, ", \"rewrites_only\": %s, \"since\": \"%s\"", r->rewrites_only ? "true" : "false",
				  r->since_start ? "start" : "rule");
			break;
		case K_DELAY:
			sb_printf(&b, ", \"ms\": %g", r->ms);
			break;
		case K_STALL:
			sb_printf(&b, ", \"every_s\": %g, \"for_s\": %g", r->every_s, r->for_s);
			break;
		default:
			break;
		}
		sb_printf(&b, ", \"age_s\": %.3f, \"active\": %s, \"hits\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
			  t - r->set_at, active(r, t) ? "true" : "false", r->hits, r->bytes);
	}
	sb_printf(&b, "%s]}\n", g.nrules ? "\n" : "");
	pthread_mutex_unlock(&g.lock);
	*len = b.len;
	return b.p;
}

/* ---------- the request path ---------- */

/* Wait out stalls (re-evaluated on every rule change) and delays; a stop ends the wait. */
static void wait_faults(int op, uint64_t off, uint64_t len)
{
	double delay_ms = 0;
	uint64_t counted[MAX_RULES];
	int ncounted = 0;
	pthread_mutex_lock(&g.lock);
	for (;;) {
		double t = now_s(), until = 0;
		for (int i = 0; i < g.nrules; i++) {
			struct rule *r = &g.rules[i];
			uint64_t lo, hi;
			if (r->kind != K_STALL || !(r->ops & op) || !active(r, t) || !overlap(r, off, len, &lo, &hi))
				continue;
			double since = t - (r->set_at + r->at_s), wstart;
			if (r->every_s > 0)
				wstart = r->set_at + r->at_s + r->every_s * (double)(uint64_t)(since / r->every_s);
			else
				wstart = r->set_at + r->at_s;
			if (t < wstart + r->for_s) {
				if (wstart + r->for_s > until)
					until = wstart + r->for_s;
				int seen = 0;
				for (int j = 0; j < ncounted; j++)
					seen |= counted[j] == r->id;
				if (!seen && ncounted < MAX_RULES) {
					counted[ncounted++] = r->id;
					r->hits++;
					r->bytes += hi - lo;
				}
			}
		}
		if (until <= t || wait_locked(until))
			break;
	}
	double t = now_s();
	for (int i = 0; i < g.nrules; i++) {
		struct rule *r = &g.rules[i];
		uint64_t lo, hi;
		if (r->kind == K_DELAY && (r->ops & op) && active(r, t) && overlap(r, off, len, &lo, &hi)) {
			delay_ms += r->ms;
			r->hits++;
			r->bytes += hi - lo;
		}
	}
	if (delay_ms > 0) {
		double until = now_s() + delay_ms / 1000.0;
		while (now_s() < until && !wait_locked(until))
			;
	}
	pthread_mutex_unlock(&g.lock);
}

/* Under g.lock: does a vanish (or, with eio_too, an eio) rule fail this request? Counts the hit. */
static int failing_locked(int op, uint64_t off, uint64_t len, double t, int eio_too)
{
	for (int i = 0; i < g.nrules; i++) {
		struct rule *r = &g.rules[i];
		uint64_t lo, hi;
		if ((r->kind != K_VANISH && (r->kind != K_EIO || !eio_too)) || !(r->ops & op) || !active(r, t) ||
		    !overlap(r, off, len, &lo, &hi))
			continue;
		r->hits++;
		r->bytes += len;
		g.errors++;
		return 1;
	}
	return 0;
}

static ssize_t full_pread(char *buf, size_t len, off_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(g.fd, buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) { /* past the backing file's end: zeroes, as a sparse tail */
			memset(buf + done, 0, len - done);
			break;
		}
		done += (size_t)n;
	}
	return (ssize_t)len;
}

static ssize_t full_pwrite(const char *buf, size_t len, off_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(g.fd, buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return (ssize_t)len;
}

static int disk_read(char *buf, size_t size, off_t off)
{
	struct rule snap[MAX_RULES];
	int ns = 0;
	uint64_t o = (uint64_t)off, len;
	if (o >= g.size)
		return 0;
	len = size < g.size - o ? size : g.size - o;
	wait_faults(OP_READ, o, len);
	pthread_mutex_lock(&g.lock);
	double t = now_s();
	g.reads++;
	if (failing_locked(OP_READ, o, len, t, 1)) {
		pthread_mutex_unlock(&g.lock);
		return -EIO;
	}
	for (int i = 0; i < g.nrules; i++) {
		struct rule *r = &g.rules[i];
		uint64_t lo, hi;
		if ((r->kind != K_FLIP && r->kind != K_MISPLACE) || !active(r, t) || !overlap(r, o, len, &lo, &hi))
			continue;
		r->hits++;
		r->bytes += hi - lo;
		snap[ns] = *r;
		snap[ns++].bitmap = NULL;
	}
	g.read_bytes += len;
	pthread_mutex_unlock(&g.lock);

	ssize_t n = full_pread(buf, len, off);
	if (n < 0)
		return (int)n;
	/* misplaced regions first (they replace data), then flips on what is returned */
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < ns; i++) {
			const struct rule *r = &snap[i];
			uint64_t lo = 0, hi = 0;
			if (!overlap(r, o, len, &lo, &hi))
				continue;
			if (k == 0 && r->kind == K_MISPLACE) {
				n = full_pread(buf + (lo - o), hi - lo, (off_t)((int64_t)lo + r->shift));
				if (n < 0)
					return (int)n;
			} else if (k == 1 && r->kind == K_FLIP) {
				for (uint64_t c = lo / r->every; c <= (hi - 1) / r->every; c++) {
					uint64_t bit = mix64(c, r->seed) % (r->every * 8);
					uint64_t at = c * r->every + bit / 8;
					if (at >= lo && at < hi)
						buf[at - o] ^= (char)(1u << (bit % 8));
				}
			}
		}
	return (int)len;
}

static int disk_write(const char *buf, size_t size, off_t off)
{
	uint64_t o = (uint64_t)off, len;
	if (o >= g.size || size > g.size - o)
		return -ENOSPC;
	len = size;
	wait_faults(OP_WRITE, o, len);
	uint64_t s0 = o / SECTOR, s1 = (o + len - 1) / SECTOR, ns = s1 - s0 + 1;
	uint8_t *drop = calloc(ns, 1);
	if (!drop)
		return -ENOMEM;
	pthread_mutex_lock(&g.lock);
	double t = now_s();
	g.writes++;
	if (failing_locked(OP_WRITE, o, len, t, 1)) {
		pthread_mutex_unlock(&g.lock);
		free(drop);
		return -EIO;
	}
	for (int i = 0; i < g.nrules; i++) {
		struct rule *r = &g.rules[i];
		uint64_t lo, hi, dropped = 0;
		if (r->kind != K_DROP || !active(r, t) || !overlap(r, o, len, &lo, &hi))
			continue;
		for (uint64_t s = lo / SECTOR; s <= (hi - 1) / SECTOR; s++) {
			int again;
			if (!r->rewrites_only) {
				again = 1;
			} else if (r->since_start) {
				again = bit_test(g.written, s);
			} else {
				again = bit_test(r->bitmap, s - r->start / SECTOR);
				bit_set(r->bitmap, s - r->start / SECTOR);
			}
			if (again && !drop[s - s0]) {
				drop[s - s0] = 1;
				dropped++;
			}
		}
		if (dropped) {
			r->hits++;
			r->bytes += dropped * SECTOR;
		}
	}
	for (uint64_t s = s0; s <= s1; s++)
		if (!drop[s - s0])
			bit_set(g.written, s);
	g.write_bytes += len;
	pthread_mutex_unlock(&g.lock);

	/* store the runs of sectors that are not dropped */
	for (uint64_t i = 0; i < ns;) {
		uint64_t j = i;
		if (drop[i]) {
			i++;
			continue;
		}
		while (j < ns && !drop[j])
			j++;
		uint64_t a = (s0 + i) * SECTOR, b = (s0 + j) * SECTOR;
		if (a < o)
			a = o;
		if (b > o + len)
			b = o + len;
		ssize_t n = full_pwrite(buf + (a - o), b - a, (off_t)a);
		if (n < 0) {
			free(drop);
			return (int)n;
		}
		i = j;
	}
	free(drop);
	return (int)len;
}

/* ---------- FUSE operations ---------- */

enum { H_DISK = 1, H_CONTROL = 2 };
/* Every open handle is on one list: the kernel sends no release for a file still open when the
 * daemon ends (the loop device's file closed just before the SIGTERM, the request still queued),
 * so what no release freed is freed when the session has ended (serve). */
struct handle { int what; char *out; size_t outlen; struct handle *prev, *next; };
static struct handle *open_handles;
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

static void handle_free(struct handle *h)
{
	free(h->out);
	free(h);
}

static int which(const char *path)
{
	if (!strcmp(path, g.path))
		return H_DISK;
	if (!strcmp(path, "/control"))
		return H_CONTROL;
	return 0;
}

static void *fd_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->direct_io = 1;
	cfg->kernel_cache = 0;
	cfg->use_ino = 0;
	pthread_mutex_lock(&g.lock);
	g.fuse = fuse_get_context()->fuse;
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

static int fd_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	switch (which(path)) {
	case H_DISK:
		st->st_mode = S_IFREG | 0600;
		st->st_size = (off_t)g.size;
		st->st_blocks = (blkcnt_t)(g.size / 512);
		break;
	case H_CONTROL:
		st->st_mode = S_IFREG | 0600;
		break;
	default:
		return -ENOENT;
	}
	st->st_nlink = 1;
	st->st_blksize = 4096;
	return 0;
}

static int fd_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, g.path + 1, NULL, 0, 0);
	fill(buf, "control", NULL, 0, 0);
	return 0;
}

static int fd_open(const char *path, struct fuse_file_info *fi)
{
	int w = which(path);
	struct handle *h;
	if (!w)
		return -ENOENT;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->what = w;
	pthread_mutex_lock(&handles_lock);
	h->next = open_handles;
	if (open_handles)
		open_handles->prev = h;
	open_handles = h;
	pthread_mutex_unlock(&handles_lock);
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	if (w == H_CONTROL)
		fi->nonseekable = 0;
	return 0;
}

static int fd_release(const char *path, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	(void)path;
	if (h) {
		pthread_mutex_lock(&handles_lock);
		if (h->prev)
			h->prev->next = h->next;
		else
			open_handles = h->next;
		if (h->next)
			h->next->prev = h->prev;
		pthread_mutex_unlock(&handles_lock);
		handle_free(h);
	}
	return 0;
}

static int fd_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	(void)fi;
	switch (which(path)) {
	case H_CONTROL:
		return 0;
	case H_DISK:
		return (uint64_t)size == g.size ? 0 : -EPERM;
	default:
		return -ENOENT;
	}
}

static int fd_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	(void)path;
	if (h->what == H_DISK)
		return disk_read(buf, size, off);
	if (!h->out) { /* one snapshot per open: successive reads see the same text */
		h->out = control_render(&h->outlen);
		if (!h->out)
			return -ENOMEM;
	}
	if ((uint64_t)off >= h->outlen)
		return 0;
	if (size > h->outlen - (size_t)off)
		size = h->outlen - (size_t)off;
	memcpy(buf, h->out + off, size);
	return (int)size;
}

static int fd_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	(void)path;
	if (h->what == H_DISK)
		return disk_write(buf, size, off);
	int rc = control_apply(buf, size);
	return rc ? rc : (int)size;
}

static int fd_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)fi;
	if (which(path) != H_DISK)
		return 0;
	pthread_mutex_lock(&g.lock);
	g.syncs++;
	int fail = failing_locked(OP_WRITE, 0, g.size, now_s(), 0);
	pthread_mutex_unlock(&g.lock);
	if (fail)
		return -EIO;
	return (datasync ? fdatasync(g.fd) : fsync(g.fd)) ? -errno : 0;
}

static int fd_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	(void)fi;
	return 0;
}

static int fd_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	(void)fi;
	if (which(path) != H_DISK)
		return -EOPNOTSUPP;
	if (off < 0 || len <= 0 || (uint64_t)off + (uint64_t)len > g.size)
		return -EINVAL;
	pthread_mutex_lock(&g.lock);
	int fail = failing_locked(OP_WRITE, (uint64_t)off, (uint64_t)len, now_s(), 1);
	pthread_mutex_unlock(&g.lock);
	if (fail)
		return -EIO;
	return fallocate(g.fd, mode, off, len) ? -errno : 0;
}

static const struct fuse_operations ops = {
	.init = fd_init,
	.getattr = fd_getattr,
	.readdir = fd_readdir,
	.open = fd_open,
	.release = fd_release,
	.truncate = fd_truncate,
	.read = fd_read,
	.write = fd_write,
	.fsync = fd_fsync,
	.flush = fd_flush,
	.fallocate = fd_fallocate,
};

/* ---------- main ---------- */

/* Mount and serve until SIGTERM/SIGINT or unmount. fuse_main's own loop would keep libfuse's
 * default of 10 worker threads: requests blocked by a stall could then hold every thread and
 * the control file (which goes through the same queue) could not clear the stall. The kernel
 * sends at most max_background (12 by default) asynchronous requests (the loop device's
 * direct I/O) at once, so MAX_THREADS leaves threads free for the control file. */
#define MAX_THREADS 64
static int serve(struct fuse_args *args)
{
	struct fuse_cmdline_opts opts;
	struct fuse_loop_config *loop;
	struct fuse *f;
	int rc = 1;

	if (fuse_parse_cmdline(args, &opts))
		return 2;
	if (opts.show_help || opts.show_version || !opts.mountpoint) {
		if (opts.show_version)
			fuse_lowlevel_version();
		else
			fprintf(stderr, "usage: faultdrive --backing=PATH [--file=NAME] MOUNTPOINT -f [-o fuse options]\n");
		free(opts.mountpoint);
		return opts.mountpoint ? 0 : 2;
	}
	f = fuse_new(args, &ops, sizeof(ops), NULL);
	if (!f)
		goto out;
	if (fuse_mount(f, opts.mountpoint))
		goto out_destroy;
	if (fuse_daemonize(opts.foreground) || fuse_set_signal_handlers(fuse_get_session(f)))
		goto out_unmount;
	loop = fuse_loop_cfg_create();
	if (loop) {
		fuse_loop_cfg_set_clone_fd(loop, (unsigned int)opts.clone_fd);
		fuse_loop_cfg_set_max_threads(loop, MAX_THREADS);
		rc = opts.singlethread ? fuse_loop(f) : fuse_loop_mt(f, loop);
		fuse_loop_cfg_destroy(loop);
	}
	fuse_remove_signal_handlers(fuse_get_session(f));
	pthread_mutex_lock(&g.lock);
	g.fuse = NULL; /* every request is answered: nothing waits any more */
	pthread_mutex_unlock(&g.lock);
out_unmount:
	fuse_unmount(f);
out_destroy:
	fuse_destroy(f);
	while (open_handles) { /* no request runs any more: the handles no release came for */
		struct handle *h = open_handles;
		open_handles = h->next;
		handle_free(h);
	}
out:
	free(opts.mountpoint);
	return rc ? 1 : 0;
}

struct cli { char *backing; char *file; };
static const struct fuse_opt cli_opts[] = {
	{ "--backing=%s", offsetof(struct cli, backing), 0 },
	{ "--file=%s", offsetof(struct cli, file), 0 },
	FUSE_OPT_END
};

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct cli cli = { 0 };
	struct stat st;
	pthread_condattr_t ca;
	int rc;

	if (fuse_opt_parse(&args, &cli, cli_opts, NULL) == -1)
		return 2;
	if (!cli.backing) {
		fprintf(stderr, "faultdrive: --backing=PATH is required\n"
			"usage: faultdrive --backing=PATH [--file=NAME] MOUNTPOINT -f [-o fuse options]\n");
		return 2;
	}
	g.file = cli.file ? cli.file : "disk";
	if (!*g.file || strchr(g.file, '/') || !strcmp(g.file, "control") || strlen(g.file) > 200) {
		fprintf(stderr, "faultdrive: --file=%s: a plain name other than 'control' (at most 200 bytes)\n", g.file);
		return 2;
	}
	snprintf(g.path, sizeof(g.path), "/%s", g.file);
	g.fd = open(cli.backing, O_RDWR | O_CLOEXEC);
	if (g.fd < 0 || fstat(g.fd, &st)) {
		fprintf(stderr, "faultdrive: %s: %s\n", cli.backing, strerror(errno));
		return 2;
	}
	g.size = (uint64_t)st.st_size;
	if (g.size < SECTOR || g.size % SECTOR) {
		fprintf(stderr, "faultdrive: %s: size %" PRIu64 " is not a positive multiple of %u bytes\n",
			cli.backing, g.size, SECTOR);
		return 2;
	}
	g.written = calloc(g.size / SECTOR / 8 + 1, 1);
	if (!g.written) {
		fprintf(stderr, "faultdrive: out of memory\n");
		return 2;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g.changed, &ca);
	pthread_condattr_destroy(&ca);
	g.started = now_s();
	rc = serve(&args);
	fuse_opt_free_args(&args);
	pthread_mutex_lock(&g.lock);
	for (int i = 0; i < g.nrules; i++)
		free_rule(&g.rules[i]);
	pthread_mutex_unlock(&g.lock);
	free(g.written);
	free(cli.backing);
	free(cli.file);
	close(g.fd);
	return rc;
}
