// SPDX-License-Identifier: MIT
/*
 * Manifests: the list of items a stream reads.  The text format is described
 * in pinmem_stream.h; parse errors name the line so a person can fix it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest.h"

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* -ENOMEM, with "what: out of memory" in err (what cut, never the reason). */
__attribute__((format(printf, 3, 4)))
static int nomem(char *err, size_t errlen, const char *fmt, ...)
{
	static const char reason[] = ": out of memory";
	va_list ap;
	size_t n;

	if (!err || errlen < sizeof(reason))
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(err, errlen - sizeof(reason) + 1, fmt, ap);
	va_end(ap);
	n = strlen(err);
	memcpy(err + n, reason, sizeof(reason));
	return -ENOMEM;
}

/* open(O_RDONLY | flags), or -errno with "path: reason" in err. */
static int open_ro(const char *path, int flags, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | flags);

	if (fd < 0) {
		fd = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-fd));
	}
	return fd;
}

int pm_manifest_create(struct pm_manifest **mp)
{
	struct pm_manifest *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	*mp = m;
	return 0;
}

void pm_manifest_destroy(struct pm_manifest *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; i < m->npaths; i++)
		free(m->paths[i]);
	free(m->paths);
	for (uint32_t i = 0; i < m->nfields; i++)
		free(m->fields[i]);
	free(m->fields);
	free(m->fhash);
	free(m->hash);
	free(m->items);
	free(m);
}

static uint32_t path_hash_len(const char *s, size_t len)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	for (size_t k = 0; k < len; k++)
		h = (h ^ (unsigned char)s[k]) * 16777619u;
	return h;
}

/*
 * Field names are a sample's extensions, few in a WebDataset; a tar that is
 * none (app.1.log, app.2.log, ...) has one per member: found by hash, and
 * bounded (the caller gives such members no field past the bound).
 */
#define FIELDS_MAX (1u << 20)

/*
 * Doubles an open-addressing table of ids (index + 1, 0 empty) of the @n
 * strings in @names (paths, field names) and hashes them again.
 */
static int table_grow(uint32_t **table, uint32_t *table_size, char *const *names, uint32_t n)
{
	uint32_t size = *table_size ? *table_size * 2 : 64;
	uint32_t *h = calloc(size, sizeof(*h));

	if (!h)
		return -ENOMEM;
	for (uint32_t id = 0; id < n; id++) {
		uint32_t i = path_hash_len(names[id], strlen(names[id])) & (size - 1);

		while (h[i])
			i = (i + 1) & (size - 1);
		h[i] = id + 1;
	}
	free(*table);
	*table = h;
	*table_size = size;
	return 0;
}

int pm_manifest_field_id(struct pm_manifest *m, const char *name, size_t len, uint32_t *idp)
{
	char **f, *copy;
	uint32_t i;

	if (2 * (m->nfields + 1) >= m->fhash_size &&
	    table_grow(&m->fhash, &m->fhash_size, m->fields, m->nfields))
		return -ENOMEM;
	for (i = path_hash_len(name, len) & (m->fhash_size - 1); m->fhash[i];
	     i = (i + 1) & (m->fhash_size - 1)) {
		const char *have = m->fields[m->fhash[i] - 1];

		if (!strncmp(have, name, len) && !have[len]) {
			*idp = m->fhash[i];
			return 0;
		}
	}
	if (m->nfields == FIELDS_MAX)
		return -E2BIG;
	if (m->nfields == m->fields_cap) {
		uint32_t cap = m->fields_cap ? m->fields_cap * 2 : 8;

		f = realloc(m->fields, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		m->fields = f;
		m->fields_cap = cap;
	}
	copy = strndup(name, len);
	if (!copy)
		return -ENOMEM;
	m->fields[m->nfields++] = copy;
	m->fhash[i] = m->nfields;
	*idp = m->nfields;
	return 0;
}

const char *pm_manifest_field(const struct pm_manifest *m, size_t i)
{
	if (i >= m->n)
		return NULL;
	return m->items[i].field ? m->fields[m->items[i].field - 1] : "";
}

int pm_manifest_group(struct pm_manifest *m, size_t first, const char *const *fields,
		      char *err, size_t errlen)
{
	uint32_t *ids;
	size_t n = m->n - first;
	int ret = 0;

	if (first >= m->n)
		return fail(err, errlen, "group from item %zu: the manifest has %zu items",
			    first, m->n);
	if (first && m->items[first - 1].sample == m->items[first].sample)
		return fail(err, errlen,
			    "group from item %zu: it is in the sample of item %zu, which would be split",
			    first, first - 1);
	ids = calloc(n, sizeof(*ids));
	if (!ids)
		return nomem(err, errlen, "group of %zu items", n);
	for (size_t k = 0; fields && k < n && !ret; k++) {
		if (!fields[k] || !fields[k][0])
			continue;
		for (size_t j = 0; j < k && !ret; j++)
			if (fields[j] && !strcmp(fields[j], fields[k]))
				ret = fail(err, errlen, "group from item %zu: field '%s' twice (items %zu and %zu)",
					   first, fields[k], first + j, first + k);
		if (!ret)
			ret = pm_manifest_field_id(m, fields[k], strlen(fields[k]), &ids[k]);
		if (ret == -ENOMEM)
			nomem(err, errlen, "field '%s'", fields[k]);
		else if (ret == -E2BIG)
			fail(err, errlen, "field '%s': a manifest holds at most %d field names",
			     fields[k], FIELDS_MAX);
	}
	if (!ret) {
		for (size_t k = 0; k < n; k++) {
			m->items[first + k].sample = m->items[first].sample;
			m->items[first + k].field = ids[k];
		}
		m->nsamples = m->items[first].sample + 1;
	}
	free(ids);
	return ret == -E2BIG ? -EINVAL : ret;
}

static uint32_t path_hash(const char *s)
{
	return path_hash_len(s, strlen(s));
}

int pm_manifest_find(const struct pm_manifest *m, const char *path, size_t len,
		     uint32_t *idp)
{
	uint32_t i;

	if (!m->hash_size)
		return -ENOENT;
	for (i = path_hash_len(path, len) & (m->hash_size - 1); m->hash[i]; i = (i + 1) & (m->hash_size - 1)) {
		const char *p = m->paths[m->hash[i] - 1];

		if (!strncmp(p, path, len) && !p[len]) {
			*idp = m->hash[i] - 1;
			return 0;
		}
	}
	return -ENOENT;
}

/* The id of path, adding it when new. */
static int path_id(struct pm_manifest *m, const char *path, uint32_t *idp)
{
	uint32_t i;
	int ret;

	if (m->npaths && !strcmp(m->paths[m->npaths - 1], path)) {
		*idp = m->npaths - 1;	/* the usual case: items of one file in a row */
		return 0;
	}
	if (2 * (m->npaths + 1) >= m->hash_size) {
		ret = table_grow(&m->hash, &m->hash_size, m->paths, m->npaths);
		if (ret)
			return ret;
	}
	i = path_hash(path) & (m->hash_size - 1);
	for (; m->hash[i]; i = (i + 1) & (m->hash_size - 1)) {
		if (!strcmp(m->paths[m->hash[i] - 1], path)) {
			*idp = m->hash[i] - 1;
			return 0;
		}
	}
	if (m->npaths == UINT32_MAX - 1)
		return -E2BIG;
	if (m->npaths == m->paths_cap) {
		uint32_t cap = m->paths_cap ? m->paths_cap * 2 : 16;
		char **p = realloc(m->paths, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		m->paths = p;
		m->paths_cap = cap;
	}
	m->paths[m->npaths] = strdup(path);
	if (!m->paths[m->npaths])
		return -ENOMEM;
	m->hash[i] = m->npaths + 1;
	*idp = m->npaths++;
	return 0;
}

/* Room for one more item. */
static int items_room(struct pm_manifest *m)
{
	size_t cap = m->cap ? m->cap * 2 : 256;
	struct pm_mitem *it;

	if (m->n < m->cap)
		return 0;
	it = realloc(m->items, cap * sizeof(*it));
	if (!it)
		return -ENOMEM;
	m->items = it;
	m->cap = cap;
	return 0;
}

int pm_manifest_add(struct pm_manifest *m, const char *path, uint64_t offset,
		    uint64_t length, bool has_crc32c, uint32_t crc32c,
		    char *err, size_t errlen)
{
	struct pm_mitem *it;
	uint32_t id;
	int ret;

	if (!path || !*path)
		return fail(err, errlen, "empty path");
	if (!length)
		return fail(err, errlen, "%s offset %llu: zero-length item",
			    path, (unsigned long long)offset);
	if (offset + length < offset || (int64_t)(offset + length) < 0)
		return fail(err, errlen,
			    "%s offset %llu length %llu: end does not fit a file offset",
			    path, (unsigned long long)offset,
			    (unsigned long long)length);
	if (m->bytes + length < m->bytes)
		return fail(err, errlen,
			    "%s offset %llu length %llu: the manifest's total bytes would overflow",
			    path, (unsigned long long)offset,
			    (unsigned long long)length);
	ret = items_room(m);
	if (!ret)
		ret = path_id(m, path, &id);
	if (ret == -ENOMEM)
		return nomem(err, errlen, "%s offset %llu length %llu", path,
			     (unsigned long long)offset, (unsigned long long)length);
	if (ret == -E2BIG) {
		fail(err, errlen, "%s: a manifest holds at most %u files", path, UINT32_MAX - 1);
		return ret;
	}
	if (ret)
		return ret;
	it = &m->items[m->n++];
	it->offset = offset;
	it->length = length;
	it->path_id = id;
	it->crc32c = crc32c;
	it->has_crc32c = has_crc32c;
	it->sample = m->nsamples++;	/* its own sample; a tar's members regroup */
	it->field = 0;
	m->bytes += length;
	return 0;
}

/* Drop items and paths added after a failure: a failed call changes nothing. */
void pm_manifest_truncate(struct pm_manifest *m, size_t n, uint32_t npaths)
{
	for (size_t i = n; i < m->n; i++)
		m->bytes -= m->items[i].length;
	m->n = n;
	m->nsamples = n ? m->items[n - 1].sample + 1 : 0;
	if (npaths == m->npaths)
		return;
	for (uint32_t id = npaths; id < m->npaths; id++)
		free(m->paths[id]);
	m->npaths = npaths;
	memset(m->hash, 0, m->hash_size * sizeof(*m->hash));
	for (uint32_t id = 0; id < npaths; id++) {
		uint32_t i = path_hash(m->paths[id]) & (m->hash_size - 1);

		while (m->hash[i])
			i = (i + 1) & (m->hash_size - 1);
		m->hash[i] = id + 1;
	}
}

int pm_manifest_add_file(struct pm_manifest *m, const char *path,
			 uint64_t item_bytes, char *err, size_t errlen)
{
	size_t before = m->n;
	uint32_t paths_before = m->npaths;
	struct stat st;
	uint64_t off, size;
	int fd, ret;

	/* O_NONBLOCK: opening a FIFO with no writer would wait forever */
	fd = open_ro(path, O_NONBLOCK, err, errlen);
	if (fd < 0)
		return fd;
	ret = fstat(fd, &st) ? -errno : 0;
	close(fd);
	if (ret) {
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return fail(err, errlen, "%s: not a regular file", path);
	size = (uint64_t)st.st_size;
	if (S_ISBLK(st.st_mode)) {
		off_t end;

		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		end = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
		if (fd >= 0)
			close(fd);
		size = end > 0 ? (uint64_t)end : 0;
	}
	if (!size)
		return 0;	/* no bytes, no items: the caller tells by the count */
	if (!item_bytes)
		item_bytes = size;
	for (off = 0; off < size; off += item_bytes) {
		uint64_t len = size - off < item_bytes ? size - off : item_bytes;

		ret = pm_manifest_add(m, path, off, len, false, 0, err, errlen);
		if (ret) {
			pm_manifest_truncate(m, before, paths_before);
			return ret;
		}
	}
	return 0;
}

size_t pm_manifest_count(const struct pm_manifest *m)
{
	return m->n;
}

uint64_t pm_manifest_bytes(const struct pm_manifest *m)
{
	return m->bytes;
}

uint32_t pm_manifest_npaths(const struct pm_manifest *m)
{
	return m->npaths;
}

const char *pm_manifest_path(const struct pm_manifest *m, uint32_t id)
{
	return id < m->npaths ? m->paths[id] : NULL;
}

int pm_manifest_item(const struct pm_manifest *m, size_t i, struct pm_item *item)
{
	const struct pm_mitem *it;

	if (i >= m->n)
		return -ERANGE;
	it = &m->items[i];
	item->path = m->paths[it->path_id];
	item->path_id = it->path_id;
	item->has_crc32c = it->has_crc32c;
	item->crc32c = it->crc32c;
	item->offset = it->offset;
	item->length = it->length;
	return 0;
}

int64_t pm_manifest_sample(const struct pm_manifest *m, size_t i)
{
	return i < m->n ? (int64_t)m->items[i].sample : -ERANGE;
}

/* --- text format --- */

struct line {
	const char *p, *end;	/* rest of the line */
	const char *name;
	unsigned long no;
	char *err;
	size_t errlen;
};

static void skip_space(struct line *l)
{
	while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\r'))
		l->p++;
}

/* Next white-space separated field into buf (unescaped); 0 at end of line. */
static int field(struct line *l, char *buf, size_t size, size_t *lenp)
{
	size_t n = 0;

	skip_space(l);
	if (l->p == l->end || *l->p == '#')
		return 0;
	while (l->p < l->end && *l->p != ' ' && *l->p != '\t' && *l->p != '\r') {
		char c = *l->p++;

		if (c == '\\') {
			if (l->p == l->end)
				return fail(l->err, l->errlen,
					    "%s:%lu: backslash at the end of the line",
					    l->name, l->no);
			c = *l->p++;
		}
		if (!c)
			return fail(l->err, l->errlen, "%s:%lu: NUL byte in the line",
				    l->name, l->no);
		if (n + 1 >= size)
			return fail(l->err, l->errlen, "%s:%lu: field longer than %zu bytes",
				    l->name, l->no, size - 1);
		buf[n++] = c;
	}
	buf[n] = 0;
	*lenp = n;
	return 1;
}

/* s with control bytes as \xNN: a \v or \f in a field is invisible when quoted. */
static const char *shown(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	for (; *s && n + 5 <= size; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f)
			n += (size_t)snprintf(buf + n, size - n, "\\x%02x", c);
		else
			buf[n++] = (char)c;
	}
	buf[n] = 0;
	return buf;
}

static int number(struct line *l, const char *what, const char *s, uint64_t *v)
{
	unsigned long long x;
	char *end, buf[4 * 64 + 1];

	/* strtoull would skip leading white space (\v, \f, ...) and take a sign */
	if (*s < '0' || *s > '9')
		goto bad;
	errno = 0;
	x = strtoull(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10);
	if (errno || end == s || *end || (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && !s[2]))
		goto bad;
	*v = x;
	return 0;
bad:
	return fail(l->err, l->errlen, "%s:%lu: %s '%s' is not a number", l->name,
		    l->no, what, shown(s, buf, sizeof(buf)));
}

static int crc_field(struct line *l, const char *s, uint32_t *v)
{
	const char *h = s;
	uint32_t x = 0;

	if (h[0] == '0' && (h[1] == 'x' || h[1] == 'X'))
		h += 2;
	if (strlen(h) != 8)
		goto bad;
	for (int i = 0; i < 8; i++) {
		char c = h[i];
		uint32_t d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			goto bad;
		x = x << 4 | d;
	}
	*v = x;
	return 0;
bad:
	return fail(l->err, l->errlen, "%s:%lu: crc32c '%s' is not 8 hex digits",
		    l->name, l->no, s);
}

static int parse_line(struct pm_manifest *m, struct line *l, const char *base_dir,
		      char *path, size_t path_size)
{
	char f[3][64], extra[64];
	uint64_t off, len;
	uint32_t crc = 0;
	size_t plen, flen, blen = base_dir ? strlen(base_dir) : 0;
	int ret, nf = 0;

	ret = field(l, path + blen + 1, path_size - blen - 1, &plen);
	if (ret <= 0)
		return ret;	/* empty or comment line */
	for (nf = 0; nf < 3; nf++) {
		ret = field(l, f[nf], sizeof(f[nf]), &flen);
		if (ret < 0)
			return ret;
		if (!ret)
			break;
	}
	if (nf < 2)
		return fail(l->err, l->errlen,
			    "%s:%lu: expected 'path offset length [crc32c]', got %d field%s",
			    l->name, l->no, nf + 1, nf ? "s" : "");
	ret = field(l, extra, sizeof(extra), &flen);
	if (ret < 0)
		return ret;
	if (ret)
		return fail(l->err, l->errlen,
			    "%s:%lu: unexpected field '%s' after 'path offset length [crc32c]'",
			    l->name, l->no, extra);
	ret = number(l, "offset", f[0], &off);
	if (!ret)
		ret = number(l, "length", f[1], &len);
	if (!ret && nf == 3)
		ret = crc_field(l, f[2], &crc);
	if (ret)
		return ret;
	if (!len)
		return fail(l->err, l->errlen, "%s:%lu: zero-length item", l->name, l->no);
	if (off + len < off || (int64_t)(off + len) < 0)
		return fail(l->err, l->errlen,
			    "%s:%lu: offset + length does not fit a file offset",
			    l->name, l->no);
	/* relative paths are relative to the manifest's directory */
	if (path[blen + 1] == '/' || !blen) {
		memmove(path, path + blen + 1, plen + 1);
	} else {
		memcpy(path, base_dir, blen);
		path[blen] = '/';
	}
	ret = pm_manifest_add(m, path, off, len, nf == 3, crc, NULL, 0);
	if (ret == -EINVAL)
		return fail(l->err, l->errlen, "%s:%lu: invalid item", l->name, l->no);
	if (ret == -ENOMEM)
		return nomem(l->err, l->errlen, "%s:%lu", l->name, l->no);
	return ret;
}

int pm_manifest_parse(struct pm_manifest *m, const char *text, size_t len,
		      const char *name, const char *base_dir, char *err,
		      size_t errlen)
{
	struct line l = { .name = name ? name : "manifest", .err = err, .errlen = errlen };
	const char *p = text, *end = text + len;
	size_t before = m->n, path_size;
	uint32_t paths_before = m->npaths;
	char *path;
	int ret = 0;

	if (base_dir && (!*base_dir || !strcmp(base_dir, ".")))
		base_dir = NULL;
	path_size = (base_dir ? strlen(base_dir) : 0) + 4097 + 1;
	path = malloc(path_size);
	if (!path)
		return nomem(err, errlen, "%s", l.name);
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);

		l.no++;
		l.p = p;
		l.end = nl ? nl : end;
		ret = parse_line(m, &l, base_dir, path, path_size);
		if (ret < 0)
			break;
		p = nl ? nl + 1 : end;
	}
	free(path);
	if (ret < 0) {
		pm_manifest_truncate(m, before, paths_before);
		return ret;
	}
	if (m->n == before)
		return fail(err, errlen, "%s: no items", l.name);
	return 0;
}

int pm_manifest_load(struct pm_manifest *m, const char *path, char *err,
		     size_t errlen)
{
	char *text = NULL, *dir, *slash;
	size_t len = 0, cap = 0;
	int fd, ret;

	fd = open_ro(path, 0, err, errlen);
	if (fd < 0)
		return fd;
	for (;;) {
		ssize_t r;

		if (len == cap) {
			char *t = realloc(text, cap ? cap * 2 : 65536);

			if (!t) {
				ret = nomem(err, errlen, "%s: after %zu bytes", path, len);
				goto out;
			}
			text = t;
			cap = cap ? cap * 2 : 65536;
		}
		r = read(fd, text + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(-ret));
			goto out;
		}
		if (!r)
			break;
		len += r;
	}
	dir = strdup(path);
	if (!dir) {
		ret = nomem(err, errlen, "%s", path);
		goto out;
	}
	slash = strrchr(dir, '/');
	if (slash)
		slash == dir ? (void)(slash[1] = 0) : (void)(*slash = 0);
	ret = pm_manifest_parse(m, text ? text : "", len, path, slash ? dir : NULL,
				err, errlen);
	free(dir);
out:
	free(text);
	close(fd);
	return ret;
}
