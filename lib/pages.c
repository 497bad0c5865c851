// SPDX-License-Identifier: MIT
/*
 * Mapping buffer memory: hugetlb, THP or base pages, stepping down
 * hugetlb -> THP -> base pages unless the caller asked strictly, and saying
 * why in the caller's note.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "fmt.h"
#include "pages.h"

#define THP_SIZE	(2UL << 20)

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static void *map_anon(size_t len, int extra)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int map_hugetlb(const struct pm_page_sizes *ps, struct pm_mapping *m, size_t size,
		       char *why, size_t why_len)
{
	size_t hp = ps->hugetlb_page_size, len;
	char hps[32];
	void *p;

	if (!hp) {
		snprintf(why, why_len, "hugetlb pages are not supported");
		return -EOPNOTSUPP;
	}
	len = round_up(size, hp);
	p = map_anon(len, MAP_HUGETLB);
	if (!p) {
		snprintf(why, why_len,
			 "hugetlb has %llu free %s pages, %zu needed (raise vm.nr_hugepages)",
			 (unsigned long long)ps->hugetlb_free_pages,
			 pm_fmt_bytes(hps, sizeof(hps), hp), len / hp);
		return -ENOMEM;
	}
	m->map = p;
	m->len = len;
	m->step = hp;
	m->kind = PM_PAGES_HUGETLB;
	return 0;
}

/* A 2 MiB-aligned mapping, so every whole 2 MiB of it can be a THP. */
static int map_thp(const struct pm_page_sizes *ps, struct pm_mapping *m, size_t size,
		   char *why, size_t why_len)
{
	size_t len = round_up(size, THP_SIZE), head;
	uint8_t *p, *a;

	if (!ps->thp) {
		snprintf(why, why_len,
			 "transparent huge pages are disabled (transparent_hugepage/enabled is never)");
		return -EOPNOTSUPP;
	}
	p = map_anon(len + THP_SIZE, 0);
	if (!p) {
		snprintf(why, why_len, "mapping for THP failed: %s", strerror(errno));
		return -errno;
	}
	a = (uint8_t *)round_up((uintptr_t)p, THP_SIZE);
	head = (size_t)(a - p);
	if (head)
		munmap(p, head);
	munmap(a + len, THP_SIZE - head);
	if (madvise(a, len, MADV_HUGEPAGE)) {
		snprintf(why, why_len, "madvise(MADV_HUGEPAGE) failed: %s", strerror(errno));
		munmap(a, len);
		return -EOPNOTSUPP;
	}
	m->map = a;
	m->len = len;
	m->step = ps->page_size;
	m->kind = PM_PAGES_THP;
	return 0;
}

int pm_pages_map(const struct pm_page_sizes *ps, size_t size, enum pm_page_kind want,
		 bool strict, struct pm_mapping *out, char *note, size_t note_len,
		 char *err, size_t err_len)
{
	size_t hp = ps->hugetlb_page_size > THP_SIZE ? ps->hugetlb_page_size : THP_SIZE;
	char why[192], sz[32];
	size_t len;
	int r;

	if (size > SIZE_MAX - hp) {
		snprintf(err, err_len, "buffer size %zu overflows when rounded up to pages", size);
		return -EOVERFLOW;
	}
	if (want == PM_PAGES_HUGETLB) {
		r = map_hugetlb(ps, out, size, why, sizeof(why));
		if (!r)
			return 0;
		if (strict) {
			snprintf(err, err_len, "hugetlb buffer of %s: %s",
				 pm_fmt_bytes(sz, sizeof(sz), size), why);
			return r;
		}
		pm_note_add(note, note_len, "%s: tried THP", why);
		want = PM_PAGES_THP;
	}
	if (want == PM_PAGES_THP) {
		r = map_thp(ps, out, size, why, sizeof(why));
		if (!r)
			return 0;
		if (strict) {
			snprintf(err, err_len, "THP buffer of %s: %s",
				 pm_fmt_bytes(sz, sizeof(sz), size), why);
			return r;
		}
		pm_note_add(note, note_len, "%s: used base pages", why);
	}
	len = round_up(size, ps->page_size);
	out->map = map_anon(len, 0);
	if (!out->map) {
		snprintf(err, err_len, "mapping %s failed: %s",
			 pm_fmt_bytes(sz, sizeof(sz), len), strerror(errno));
		return -ENOMEM;
	}
	out->len = len;
	out->step = ps->page_size;
	out->kind = PM_PAGES_DEFAULT;
	return 0;
}

void pm_pages_unmap(void *map, size_t len)
{
	if (map)
		munmap(map, len);
}

uint64_t pm_smaps_huge_bytes(const void *ptr, size_t len)
{
	uintptr_t lo = (uintptr_t)ptr, hi = lo + len;
	unsigned long long start, end, kib;
	uint64_t huge = 0;
	bool in = false;
	char line[256];
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx ", &start, &end) == 2) {
			in = start < hi && end > lo;
			continue;
		}
		if (!in)
			continue;
		if (sscanf(line, "AnonHugePages: %llu kB", &kib) == 1 ||
		    sscanf(line, "Private_Hugetlb: %llu kB", &kib) == 1 ||
		    sscanf(line, "Shared_Hugetlb: %llu kB", &kib) == 1)
			huge += (uint64_t)kib << 10;
	}
	fclose(f);
	return huge < len ? huge : len;
}
