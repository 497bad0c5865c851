/* SPDX-License-Identifier: MIT */
/* Faulting buffer pages in with several threads before they are pinned (lib/fault.c). */
#ifndef PM_FAULT_H
#define PM_FAULT_H

#include <sched.h>
#include <stddef.h>

/* Threads to fault len bytes with: asked, or one per 64 MiB up to cpus. */
unsigned int pm_fault_threads_for(unsigned int cpus, size_t len, unsigned int asked);
/* Write-fault every page of [ptr, ptr + len) without changing its bytes. */
int pm_fault_in(void *ptr, size_t len, size_t step, unsigned int threads);
/* The same with the threads on cpus (NULL: anywhere). */
int pm_fault_in_on(void *ptr, size_t len, size_t step, unsigned int threads,
		   const cpu_set_t *cpus);

#endif /* PM_FAULT_H */
