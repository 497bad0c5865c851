/* SPDX-License-Identifier: MIT */
/* Mapping buffer memory: hugetlb, THP or base pages (lib/pages.c). */
#ifndef PM_PAGES_H
#define PM_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinmem.h"

/* What this machine offers (the context probes it). */
struct pm_page_sizes {
	size_t page_size;
	uint64_t hugetlb_page_size;	/* 0: no hugetlb */
	uint64_t hugetlb_free_pages;
	bool thp;			/* transparent huge pages not disabled */
};

/* A mapping made for a buffer. */
struct pm_mapping {
	void *map;
	size_t len;
	size_t step;			/* bytes per page of the mapping */
	enum pm_page_kind kind;
};

/*
 * Map >= size bytes of the page kind asked, stepping down hugetlb -> THP ->
 * base pages unless strict, each step's reason appended to note.  0, or
 * -errno with the sentence in err.
 */
int pm_pages_map(const struct pm_page_sizes *ps, size_t size, enum pm_page_kind want,
		 bool strict, struct pm_mapping *out, char *note, size_t note_len,
		 char *err, size_t err_len);
/* Undo pm_pages_map (map NULL: nothing). */
void pm_pages_unmap(void *map, size_t len);
/* Bytes of [ptr, ptr + len) that /proc/self/smaps shows as huge pages;
 * UINT64_MAX when it cannot be read (EMFILE, no /proc). */
uint64_t pm_smaps_huge_bytes(const void *ptr, size_t len);

#endif /* PM_PAGES_H */
