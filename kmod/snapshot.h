/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem snapshots for the stats file: arrays copied a batch at a time
 * under a lock, grown outside it (users, cgroups, open files).
 */
#ifndef _PINMEM_SNAPSHOT_H
#define _PINMEM_SNAPSHOT_H

#include <linux/errno.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/string.h>

/**
 * pinmem_snapshot_room() - make room for one more batch in a snapshot array
 * @rows: the array (kvmalloc'ed, or NULL); replaced by a larger copy
 * @cap: entries @rows holds; updated
 * @n: entries in use
 * @size: bytes of one entry
 * @batch: entries the next copy may add
 *
 * Called without the lock the copy takes.  On failure @rows is left as it
 * was, for the caller to free.
 *
 * Return: 0 or -ENOMEM.
 */
static inline int pinmem_snapshot_room(void **rows, size_t *cap, size_t n,
				       size_t size, size_t batch)
{
	size_t bigger = 2 * *cap + batch;
	void *v;

	if (*cap - n >= batch)
		return 0;
	v = kvmalloc_array(bigger, size, GFP_KERNEL);
	if (!v)
		return -ENOMEM;
	if (n)
		memcpy(v, *rows, n * size);
	kvfree(*rows);
	*rows = v;
	*cap = bigger;
	return 0;
}

#endif /* _PINMEM_SNAPSHOT_H */
