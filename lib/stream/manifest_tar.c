// SPDX-License-Identifier: MIT
/*
 * Tar shards as manifest items: each regular member becomes an item read in
 * place (its data's offset and size in the archive), nothing is extracted.
 * Headers are POSIX ustar with GNU long names ('L') and base-256 sizes, and
 * pax extended headers ('x': path and size).  Sparse members are refused:
 * their data is a map and packed pieces, not the file's bytes in place.
 * Members are grouped into samples by WebDataset key, as webdataset's
 * tariterators do: the path up to the first dot of its file name
 * ("train/000123.jpg" and "train/000123.cls" are one sample).  Every
 * refusal names the archive and the offset of the header at fault.
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

#define BLOCK		512
#define NAME_MAX_LEN	4096	/* longest member path taken from 'L' or pax */

struct tar {
	const char *path;
	int fd;
	uint64_t size;		/* of the archive */
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4)))
static int bad(struct tar *t, uint64_t off, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(t->err, t->errlen, "%s: header at offset %llu: %s", t->path,
		 (unsigned long long)off, what);
	return -EINVAL;
}

static int read_at(struct tar *t, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(t->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(t->err, t->errlen, "%s: read at offset %llu: %s", t->path,
				 (unsigned long long)(off + done), strerror(errno));
			return -errno;
		}
		if (!r)
			return -ENODATA;
		done += (size_t)r;
	}
	return 0;
}

/* Octal (space/NUL padded) or GNU base-256 number; false when malformed. */
static bool number(const unsigned char *f, size_t len, uint64_t *v)
{
	size_t i = 0;
	bool digits = false;

	*v = 0;
	if (f[0] & 0x80) {
		/* base-256: big-endian, the first byte's top bit is the marker */
		if (f[0] != 0x80)
			return false;	/* negative or too large */
		for (i = 1; i < len; i++) {
			if (*v >> 56)
				return false;
			*v = (*v << 8) | f[i];
		}
		return true;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (*v >> 60)
			return false;
		*v = *v * 8 + (f[i] - '0');
		digits = true;
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i])
			return false;
	return digits;
}

/* The header's checksum as stored, against both the unsigned and the old signed sum. */
static bool checksum_ok(const unsigned char *h)
{
	uint64_t want;
	long sum_u = 0, sum_s = 0;

	if (!number(h + 148, 8, &want))
		return false;
	for (int i = 0; i < BLOCK; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];

		sum_u += c;
		sum_s += (signed char)c;
	}
	return (long)want == sum_u || (long)want == sum_s;
}

static bool zero_block(const unsigned char *h)
{
	for (int i = 0; i < BLOCK; i++)
		if (h[i])
			return false;
	return true;
}

/* What extension headers ('L', 'x') say of the next member header, and of it alone. */
struct pending {
	char name[NAME_MAX_LEN];
	bool have_name;
	bool has_size;
	uint64_t size;
};

static int sparse(struct tar *t, uint64_t hoff, const char *how)
{
	return bad(t, hoff, "sparse member (%s) not supported: members are read in place, so holes cannot be filled; extract it or re-create the archive without --sparse",
		   how);
}

/* A member path from 'L' or pax: refused, not cut, when it does not fit. */
static int long_name(struct tar *t, uint64_t hoff, const char *what, const char *s,
		     size_t len, struct pending *pd)
{
	if (len >= NAME_MAX_LEN)
		return bad(t, hoff, "%s of %zu bytes is too long (at most %d)", what, len,
			   NAME_MAX_LEN - 1);
	memcpy(pd->name, s, len);
	pd->name[len] = 0;
	pd->have_name = true;
	return 0;
}

/* pax records "LEN key=value\n": take path and size; GNU.sparse.* is refused. */
static int pax(struct tar *t, uint64_t hoff, const char *p, size_t n, struct pending *pd)
{
	size_t i = 0;
	int ret;

	while (i < n) {
		size_t len = 0, k = i, vl;
		const char *kv, *eq;

		while (k < n && p[k] >= '0' && p[k] <= '9' && len < n)
			len = len * 10 + (size_t)(p[k++] - '0');
		if (k >= n || p[k] != ' ' || len <= k - i || i + len > n || p[i + len - 1] != '\n')
			return bad(t, hoff, "malformed pax record at byte %zu", i);
		kv = p + k + 1;
		eq = memchr(kv, '=', (size_t)(p + i + len - 1 - kv));
		if (!eq)
			return bad(t, hoff, "malformed pax record at byte %zu", i);
		vl = (size_t)(p + i + len - 1 - (eq + 1));
		if (eq - kv >= 11 && !memcmp(kv, "GNU.sparse.", 11)) {
			return sparse(t, hoff, "pax GNU.sparse keys");
		} else if (eq - kv == 4 && !memcmp(kv, "path", 4)) {
			if (memchr(eq + 1, 0, vl))
				return bad(t, hoff, "pax path holds a NUL byte");
			ret = long_name(t, hoff, "pax path", eq + 1, vl, pd);
			if (ret)
				return ret;
		} else if (eq - kv == 4 && !memcmp(kv, "size", 4)) {
			char num[32];
			char *end;

			if (!vl || vl >= sizeof(num))
				return bad(t, hoff, "pax size is not a number");
			memcpy(num, eq + 1, vl);
			num[vl] = 0;
			errno = 0;
			pd->size = strtoull(num, &end, 10);
			if (errno || *end || num[0] < '0' || num[0] > '9')
				return bad(t, hoff, "pax size '%s' is not a number", num);
			pd->has_size = true;
		}
		i += len;
	}
	return 0;
}

/* Length of the WebDataset key of a member path: up to the first dot of its file name. */
static size_t key_len(const char *name)
{
	const char *base = strrchr(name, '/');
	const char *dot;

	base = base ? base + 1 : name;
	dot = strchr(base, '.');
	return dot ? (size_t)(dot - name) : strlen(name);
}

/* Read an extension header's data (a long name or pax records) into a new string. */
static int ext_data(struct tar *t, uint64_t hoff, uint64_t size, char **out)
{
	char *p;
	int ret;

	if (size > 1 << 20)
		return bad(t, hoff, "extension header of %llu bytes (at most 1 MiB)",
			   (unsigned long long)size);
	p = malloc(size + 1);
	if (!p) {
		snprintf(t->err, t->errlen, "%s: header at offset %llu: out of memory for its %llu bytes of data",
			 t->path, (unsigned long long)hoff, (unsigned long long)size);
		return -ENOMEM;
	}
	ret = read_at(t, p, size, hoff + BLOCK);
	if (ret == -ENODATA)
		ret = bad(t, hoff, "truncated: its %llu bytes of data end past the archive's end (%llu bytes)",
			  (unsigned long long)size, (unsigned long long)t->size);
	if (ret) {
		free(p);
		return ret;
	}
	p[size] = 0;
	*out = p;
	return 0;
}

static bool extension(char type)
{
	return type == 'L' || type == 'K' || type == 'x' || type == 'g';
}

/*
 * 'L' (long name) and 'x' (pax) describe the next member header; 'K' (long
 * link name) and 'g' (pax global) say nothing pinmem uses.  None of them
 * ends what the others left pending.
 */
static int read_extension(struct tar *t, uint64_t off, char type, uint64_t size,
			  struct pending *pd)
{
	char *p = NULL;
	int ret;

	if (type != 'L' && type != 'x')
		return 0;
	ret = ext_data(t, off, size, &p);
	if (ret)
		return ret;
	if (type == 'L')
		ret = long_name(t, off, "GNU long name", p, strnlen(p, size), pd);
	else
		ret = pax(t, off, p, size, pd);
	free(p);
	return ret;
}

/* A member's data size by its type, or a refusal where tools disagree. */
static int member_size(struct tar *t, uint64_t off, char type, uint64_t *size)
{
	switch (type) {
	case '1':
	case '5':
		*size = 0;	/* no data whatever the field says, as GNU tar and tarfile read them */
		return 0;
	case '2':
	case '3':
	case '4':
	case '6':
		if (*size)
			return bad(t, off, "type '%c' member with a size of %llu bytes: tools disagree on whether data follows; re-create the archive",
				   type, (unsigned long long)*size);
		return 0;
	case 'S':
		return sparse(t, off, "GNU type 'S'");
	}
	return 0;
}

/* The member's path: a pending long name, else the ustar (POSIX only) prefix and name. */
static void member_name(const unsigned char *h, struct pending *pd)
{
	int pl = (int)strnlen((const char *)h + 345, 155);
	int nl = (int)strnlen((const char *)h, 100);

	if (pd->have_name)
		return;
	/* GNU's magic "ustar  \0" keeps atime and ctime where POSIX has the prefix */
	if (!memcmp(h + 257, "ustar", 6) && !memcmp(h + 263, "00", 2) && pl)
		snprintf(pd->name, sizeof(pd->name), "%.*s/%.*s", pl, (const char *)h + 345,
			 nl, (const char *)h);
	else
		snprintf(pd->name, sizeof(pd->name), "%.*s", nl, (const char *)h);
}

/* The field of a member (its name after the key's dot), lower-cased as webdataset does; -errno. */
static int member_field(struct pm_manifest *m, struct tar *t, uint64_t off, const char *name,
			size_t kl, uint32_t *id)
{
	char f[NAME_MAX_LEN];
	size_t n = 0;
	int ret;

	*id = 0;
	if (!name[kl])
		return 0;	/* no dot: the whole name is the key, no field */
	for (const char *c = name + kl + 1; *c && n < sizeof(f) - 1; c++)
		f[n++] = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
	ret = pm_manifest_field_id(m, f, n, id);
	/*
	 * A tar that is no WebDataset (app.1.log, app.2.log, ...) can name more
	 * fields than a manifest keeps: past that many, members have no field,
	 * as names without a dot do, and the archive still indexes.
	 */
	if (ret == -E2BIG) {
		*id = 0;
		return 0;
	}
	if (ret)
		snprintf(t->err, t->errlen, "%s: header at offset %llu: out of memory", t->path,
			 (unsigned long long)off);
	return ret;
}

/*
 * An item for a regular member; it joins the sample of the member before
 * when it has the same key and a field that sample does not have yet
 * (webdataset's group_by_keys starts a new sample on a repeated field).
 */
static int add_member(struct pm_manifest *m, struct tar *t, uint64_t off, const char *name,
		      uint64_t data, uint64_t size, char *key, bool *have_key, size_t *first)
{
	size_t kl = key_len(name);
	bool same = *have_key && strlen(key) == kl && !strncmp(key, name, kl);
	uint32_t field;
	int ret;

	ret = member_field(m, t, off, name, kl, &field);
	for (size_t i = *first; same && !ret && i < m->n; i++)
		if (m->items[i].field == field)
			same = false;
	if (!ret)
		ret = pm_manifest_add(m, t->path, data, size, false, 0, t->err, t->errlen);
	if (ret)
		return ret;
	m->items[m->n - 1].field = field;
	if (same) {
		m->items[m->n - 1].sample = m->items[m->n - 2].sample;
		m->nsamples--;
	} else {
		*first = m->n - 1;
	}
	memcpy(key, name, kl);
	key[kl] = 0;
	*have_key = true;
	return 0;
}

/* An empty member of another key than the sample's ends that sample. */
static void empty_member(const char *name, const char *key, bool *have_key)
{
	size_t kl = key_len(name);

	if (*have_key && (strlen(key) != kl || strncmp(key, name, kl)))
		*have_key = false;
}

/*
 * A zero block ends the archive when another follows it or the archive ends
 * (GNU tar tolerates a lone one there); one before more headers is damage,
 * not an end: the members after it would be dropped without a word.
 */
static int zero_block_ends(struct tar *t, uint64_t off)
{
	unsigned char h[BLOCK];
	int ret;

	if (t->size - off < 2 * BLOCK)
		return 0;
	ret = read_at(t, h, BLOCK, off + BLOCK);
	if (ret)
		return ret == -ENODATA ? 0 : ret;
	if (zero_block(h))
		return 0;
	snprintf(t->err, t->errlen, "%s: zero block at offset %llu followed by more members: the archive is damaged",
		 t->path, (unsigned long long)off);
	return -EINVAL;
}

static int index_tar(struct pm_manifest *m, struct tar *t)
{
	struct pending p = { .have_name = false }, *pd = &p;
	unsigned char h[BLOCK];
	char key[NAME_MAX_LEN] = "";
	bool have_key = false;
	size_t first = m->n;	/* the current sample's first item */
	uint64_t off = 0, ext_off = 0;
	int ret;

	for (;;) {
		uint64_t size, data;
		char type;

		/* no end blocks: tolerated, as GNU tar does, unless a member was announced */
		if (off == t->size && (pd->have_name || pd->has_size))
			return bad(t, ext_off, "truncated: the archive ends before the member this header describes (%llu bytes)",
				   (unsigned long long)t->size);
		if (off == t->size)
			return 0;
		ret = read_at(t, h, BLOCK, off);
		if (ret == -ENODATA)
			return bad(t, off, "truncated: the archive ends inside a header (%llu bytes)",
				   (unsigned long long)t->size);
		if (ret)
			return ret;
		if (zero_block(h) && (pd->have_name || pd->has_size))
			return bad(t, ext_off, "the archive ends (a zero block at offset %llu) before the member this header describes",
				   (unsigned long long)off);
		if (zero_block(h))
			return zero_block_ends(t, off);
		if (!checksum_ok(h))
			return bad(t, off, "checksum mismatch (a corrupt header, or not a tar archive)");
		if (!number(h + 124, 12, &size))
			return bad(t, off, "size field is not a number");
		type = (char)h[156];
		if (!extension(type) && pd->has_size)
			size = pd->size;
		ret = member_size(t, off, type, &size);
		if (ret)
			return ret;
		data = off + BLOCK;
		if (size > t->size || data > t->size - size)
			return bad(t, off, "member of %llu bytes ends past the archive's end (%llu bytes): truncated",
				   (unsigned long long)size, (unsigned long long)t->size);
		if (extension(type)) {
			ext_off = off;
			ret = read_extension(t, off, type, size, pd);
		} else {
			member_name(h, pd);
			/*
			 * An empty member has no bytes to read: no item (manifests
			 * refuse 0); a new key in it still ends the sample before,
			 * as webdataset's group_by_keys sees it.
			 */
			if ((type == '0' || type == '\0' || type == '7') && size)
				ret = add_member(m, t, off, pd->name, data, size, key, &have_key,
						 &first);
			else if (type == '0' || type == '\0' || type == '7')
				empty_member(pd->name, key, &have_key);
			pd->have_name = false;
			pd->has_size = false;
		}
		if (ret)
			return ret;
		off = data + (size + BLOCK - 1) / BLOCK * BLOCK;
		if (off > t->size)
			off = t->size;	/* the last member's padding may be cut: no end blocks */
	}
}

int pm_manifest_add_tar(struct pm_manifest *m, const char *path, char *err, size_t errlen)
{
	size_t before = m->n;
	uint32_t paths_before = m->npaths;
	struct tar t = { .path = path, .err = err, .errlen = errlen };
	struct stat st;
	int ret;

	/* O_NONBLOCK: opening a FIFO with no writer would wait forever */
	t.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (t.fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(t.fd, &st)) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		ret = -EINVAL;
	} else {
		t.size = (uint64_t)st.st_size;
		ret = index_tar(m, &t);	/* no members: no items, like an empty file */
	}
	close(t.fd);
	if (ret)
		pm_manifest_truncate(m, before, paths_before);
	return ret;
}
