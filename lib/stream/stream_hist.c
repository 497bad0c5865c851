// SPDX-License-Identifier: MIT
/* Per-batch latency histograms of a stream (see stream_hist.h). */
#include "stream_hist.h"

static unsigned int bucket(uint64_t ns)
{
	unsigned int lg;

	if (ns < PM_HIST_SUB)
		return (unsigned int)ns;
	lg = 63 - __builtin_clzll(ns);	/* >= 3 */
	return (lg - 2) * PM_HIST_SUB +
	       (unsigned int)((ns >> (lg - 3)) & (PM_HIST_SUB - 1));
}

/* Upper end of a bucket, in ns. */
static uint64_t bucket_top(unsigned int b)
{
	unsigned int lg = b / PM_HIST_SUB + 2, sub = b % PM_HIST_SUB;

	if (b < PM_HIST_SUB)
		return b;
	return ((uint64_t)(PM_HIST_SUB + sub + 1) << (lg - 3)) - 1;
}

void pm_hist_add(struct pm_hist *h, uint64_t ns)
{
	unsigned int b = bucket(ns);

	h->b[b < PM_HIST_BUCKETS ? b : PM_HIST_BUCKETS - 1]++;
	h->count++;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

static double percentile(const struct pm_hist *h, double q)
{
	uint64_t want = (uint64_t)(q * (double)h->count + 0.999999), seen = 0;

	if (!want)
		want = 1;
	for (unsigned int b = 0; b < PM_HIST_BUCKETS; b++) {
		seen += h->b[b];
		if (seen >= want) {
			uint64_t top = bucket_top(b);

			return (top < h->max_ns ? top : h->max_ns) / 1e9;
		}
	}
	return h->max_ns / 1e9;
}

void pm_hist_latency(const struct pm_hist *h, struct pm_latency *lat)
{
	if (!h->count) {
		*lat = (struct pm_latency){ 0 };
		return;
	}
	lat->p50 = percentile(h, 0.50);
	lat->p90 = percentile(h, 0.90);
	lat->p99 = percentile(h, 0.99);
	lat->max = h->max_ns / 1e9;
}
