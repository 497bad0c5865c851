// SPDX-License-Identifier: MIT
/*
 * NUMA placement of pinned memory: a GPU reads host memory fastest from the
 * socket its PCIe root port hangs off, so buffers for a CUDA device go on
 * that device's node.  The node comes from sysfs (the PCI device's
 * numa_node), the placement from mbind() before the first fault, and the
 * faulting threads run on the node's CPUs (zeroing local memory).  Plain
 * system calls: libnuma would add a dependency for three calls.  Every path
 * is prefixed with the context's root, so tests bring their own sysfs.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "numa.h"

/* The first line of root + path, or false. */
static bool read_first_line(const char *root, const char *path, char *line, size_t len)
{
	char full[PATH_MAX];
	FILE *f;
	bool ok;

	snprintf(full, sizeof(full), "%s%s", root ? root : "", path);
	f = fopen(full, "re");
	if (!f)
		return false;
	ok = fgets(line, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

int pm_numa_gpu_node(const char *root, const char *pci_bus_id, char *note, size_t len)
{
	char path[128], bus[32], line[32];
	int node;
	size_t i;

	if (!pci_bus_id || !pci_bus_id[0]) {
		snprintf(note, len, "no GPU: slots are not placed");
		return -1;
	}
	/* sysfs names PCI devices in lower case, the CUDA runtime in upper case */
	for (i = 0; pci_bus_id[i] && i < sizeof(bus) - 1; i++)
		bus[i] = (char)tolower((unsigned char)pci_bus_id[i]);
	bus[i] = '\0';
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bus);
	if (!read_first_line(root, path, line, sizeof(line)) || sscanf(line, "%d", &node) != 1) {
		snprintf(note, len, "the GPU's NUMA node is unknown (no %s)", path);
		return -1;
	}
	if (node < 0) {
		snprintf(note, len, "the GPU's NUMA node is unknown (%s says %d: one node, or firmware did not say)",
			 path, node);
		return -1;
	}
	note[0] = '\0';
	return node;
}

int pm_numa_cpus(const char *root, int node, cpu_set_t *set)
{
	char path[96], line[4096], *p;
	long a, b;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	if (!read_first_line(root, path, line, sizeof(line)))
		return -ENOENT;
	CPU_ZERO(set);
	/* "0-15,32-47" */
	for (p = line; *p && *p != '\n';) {
		a = strtol(p, &p, 10);
		b = *p == '-' ? strtol(p + 1, &p, 10) : a;
		if (a < 0 || b < a || b >= CPU_SETSIZE)
			return -EINVAL;
		for (; a <= b; a++)
			CPU_SET((int)a, set);
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -EINVAL;
	}
	return CPU_COUNT(set) ? 0 : -ENOENT;
}

int pm_numa_place(void *p, size_t len, int node)
{
	unsigned long mask[PM_NUMA_MAX / (8 * sizeof(unsigned long))] = { 0 };

	if (node < 0 || node >= PM_NUMA_MAX)
		return -EINVAL;
	mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
	/* preferred, not bound: a full node spills over instead of failing the fault */
	if (syscall(SYS_mbind, p, len, MPOL_PREFERRED, mask, PM_NUMA_MAX + 1, 0)) {
		/* A kernel without CONFIG_NUMA has node 0 only: already there. */
		if (errno == ENOSYS && node == 0)
			return 0;
		return errno == ENOSYS ? -EINVAL : -errno;
	}
	return 0;
}

int pm_numa_node_of(const void *p)
{
	int node = -1;

	if (syscall(SYS_get_mempolicy, &node, NULL, 0, p, MPOL_F_NODE | MPOL_F_ADDR))
		return errno == ENOSYS ? 0 : -1;	/* no CONFIG_NUMA: node 0 */
	return node;
}
