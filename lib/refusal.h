/* SPDX-License-Identifier: MIT */
/* The sentence for a refused pin (lib/refusal.c). */
#ifndef PM_REFUSAL_H
#define PM_REFUSAL_H

#include <stddef.h>
#include <stdint.h>

#include "sys.h"
#include "uapi/pinmem.h"

/*
 * The sentence for a failed PIN of len bytes through /dev/pinmem (dev_fd),
 * written to msg; returns the errno to report (err).  reason is
 * pinmem_pin.refused as the module wrote it back (PINMEM_REFUSED_*, ABI
 * 1.1), or 0 from an older module: then, with before (STATS taken just
 * before the PIN), a budget errno whose refusal counter did not move is
 * reported as the failure it was (the module's ENOMEM also means "out of
 * memory", not only RLIMIT_MEMLOCK).  Use and limit come from STATS.
 */
int pm_refusal_module(const struct pm_sys_ops *sys, int dev_fd, int err, size_t len,
		      const struct pinmem_stats *before, uint32_t reason,
		      char *msg, size_t msg_len);
/* The sentence for a failed mlock of len bytes; returns the errno to report. */
int pm_refusal_mlock(const struct pm_sys_ops *sys, int err, size_t len,
		     char *msg, size_t msg_len);

#endif /* PM_REFUSAL_H */
