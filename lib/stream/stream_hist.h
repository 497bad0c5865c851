/* SPDX-License-Identifier: MIT */
/*
 * Latency histograms: log2 buckets split in 8, so a percentile is within
 * 12.5% of the true value, in constant memory however long a stream runs.
 */
#ifndef PM_STREAM_HIST_H
#define PM_STREAM_HIST_H

#include <stdint.h>

#include "pinmem_stream.h"

#define PM_HIST_SUB	8
#define PM_HIST_BUCKETS	(64 * PM_HIST_SUB)

struct pm_hist {
	uint64_t count;
	uint64_t max_ns;
	uint32_t b[PM_HIST_BUCKETS];
};

void pm_hist_add(struct pm_hist *h, uint64_t ns);
/* p50/p90/p99/max in seconds; zeros when empty. */
void pm_hist_latency(const struct pm_hist *h, struct pm_latency *lat);

#endif
