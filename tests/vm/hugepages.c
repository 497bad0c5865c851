// SPDX-License-Identifier: MIT
/*
 * vm-hugepages N: reserve N huge pages outside ZONE_MOVABLE in the test VM.
 *
 * The VM boots with movablecore= so that tests can watch long-term pins move
 * user pages out of ZONE_MOVABLE.  The hugetlb pool would be allocated there
 * too (2 MiB pages are migratable), and 6.1 cannot long-term pin such a page:
 * follow_hugetlb_page() WARNs and GUP fails with ENOMEM.  Later kernels
 * migrate it.  So fill ZONE_MOVABLE with anonymous memory first, reserve the
 * pool (it then comes from the other zones), and let the filler go.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK	(2UL << 20)

/* Free pages of the Movable zone, -1 without one. */
static long movable_free(void)
{
	FILE *f = fopen("/proc/zoneinfo", "re");
	char line[256];
	long v, free_pages = -1;
	int in = 0;

	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Node ", 5))
			in = strstr(line, "zone  Movable") != NULL;
		else if (in && sscanf(line, " pages free %ld", &v) == 1)
			free_pages = v;
	}
	if (f)
		fclose(f);
	return free_pages;
}

int main(int argc, char **argv)
{
	long before = movable_free(), last = before, now;
	unsigned long filled = 0, max = 1536UL << 20;
	int stuck = 0, n;
	FILE *f;

	if (argc != 2 || (n = atoi(argv[1])) < 0) {
		fprintf(stderr, "usage: %s NR_HUGEPAGES\n", argv[0]);
		return 2;
	}
	/* Fill until the zone stops giving pages (its watermark) or 1.5 GiB. */
	while (before > 0 && filled < max && stuck < 8) {
		if (mmap(NULL, CHUNK, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0) == MAP_FAILED)
			break;
		filled += CHUNK;
		now = movable_free();
		stuck = now < last ? 0 : stuck + 1;
		last = now;
	}
	f = fopen("/proc/sys/vm/nr_hugepages", "we");
	if (!f || fprintf(f, "%d\n", n) < 0 || fclose(f)) {
		perror("nr_hugepages");
		return 1;
	}
	printf("vm-hugepages: %d requested, ZONE_MOVABLE free pages %ld, %ld while %lu MiB filled\n",
	       n, before, last, filled >> 20);
	return 0;
}
