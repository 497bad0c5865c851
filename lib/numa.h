/* SPDX-License-Identifier: MIT */
/* NUMA placement of buffers on their GPU's node (lib/numa.c). */
#ifndef PM_NUMA_H
#define PM_NUMA_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* Nodes the kernel may have (MAX_NUMNODES of distribution kernels). */
#define PM_NUMA_MAX 1024

/* The node of the PCI device ("0000:41:00.0"), -1 with note saying why. */
int pm_numa_gpu_node(const char *root, const char *pci_bus_id, char *note, size_t len);
/* The CPUs of a node (its sysfs cpulist); 0 or -errno. */
int pm_numa_cpus(const char *root, int node, cpu_set_t *set);
/* Prefer node for [p, p + len) before it is faulted; 0 or -errno (-EINVAL: no such node, also any node but 0 without CONFIG_NUMA). */
int pm_numa_place(void *p, size_t len, int node);
/* The node of the page at p (faulted; 0 without CONFIG_NUMA), or -1. */
int pm_numa_node_of(const void *p);

#endif /* PM_NUMA_H */
