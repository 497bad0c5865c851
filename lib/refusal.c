// SPDX-License-Identifier: MIT
/*
 * Turning a refused pin into one sentence a person can act on: which budget
 * refused, what is in use, the limit and the amount asked for.  The module's
 * numbers come from the STATS ioctl right after the refusal; mlock's from
 * RLIMIT_MEMLOCK and VmLck.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"

static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };

static unsigned int unit_of(uint64_t bytes)
{
	unsigned int u = 0;

	while (u < 6 && bytes >= (1024ULL << (10 * u)))
		u++;
	return u;
}

static double in_unit(uint64_t bytes, unsigned int u)
{
	return (double)bytes / (double)(1ULL << (10 * u));
}

char *pm_fmt_bytes(char *out, size_t len, uint64_t bytes)
{
	unsigned int u = unit_of(bytes);

	if (!u)
		snprintf(out, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(out, len, "%.1f %s", in_unit(bytes, u), units[u]);
	return out;
}

/* "30.5 of 32.0 GiB", or "12.0 MiB of 32.0 GiB" when the units differ. */
static char *fmt_use(char *out, size_t len, uint64_t used, uint64_t limit)
{
	unsigned int uu = unit_of(used), lu = unit_of(limit);
	char a[32], b[32];

	if (uu == lu && lu)
		snprintf(out, len, "%.1f of %.1f %s", in_unit(used, lu),
			 in_unit(limit, lu), units[lu]);
	else
		snprintf(out, len, "%s of %s", pm_fmt_bytes(a, sizeof(a), used),
			 pm_fmt_bytes(b, sizeof(b), limit));
	return out;
}

int pm_refuse_module(struct pm_ctx *ctx, int err, size_t len,
		     const struct pinmem_stats *before)
{
	struct pinmem_stats st;
	const char *budget, *hint = "";
	uint64_t used, limit, refused, refused_before;
	char ask[32], use[64];
	int r;

	pm_fmt_bytes(ask, sizeof(ask), len);
	if (err != -PINMEM_ERR_GLOBAL && err != -PINMEM_ERR_USER &&
	    err != -PINMEM_ERR_RLIMIT)
		return pm_ctx_error(ctx, err, "pinning %s through /dev/pinmem failed: %s",
				    ask, strerror(-err));

	memset(&st, 0, sizeof(st));
	r = ctx->sys->ioctl(ctx->dev_fd, PINMEM_IOC_STATS, &st);
	if (err == -PINMEM_ERR_GLOBAL) {
		budget = "the global budget";
		used = st.global.pinned_bytes;
		limit = st.global.limit_bytes;
		refused = st.file.refused_global;
		refused_before = before ? before->file.refused_global : 0;
	} else if (err == -PINMEM_ERR_USER) {
		budget = "the per-user budget";
		used = st.user.pinned_bytes;
		limit = st.user.limit_bytes;
		refused = st.file.refused_user;
		refused_before = before ? before->file.refused_user : 0;
	} else {
		budget = "RLIMIT_MEMLOCK";
		used = st.mm_pinned_bytes;
		limit = st.file.limit_bytes;
		hint = "; raise it with ulimit -l";
		refused = st.file.refused_rlimit;
		refused_before = before ? before->file.refused_rlimit : 0;
	}
	if (!r && before && refused == refused_before)
		return pm_ctx_error(ctx, err, "pinning %s through /dev/pinmem failed: %s (no budget refused it)",
				    ask, strerror(-err));
	if (r)
		return pm_ctx_error(ctx, err, "pinning %s was refused by %s (reading its use failed: %s)",
				    ask, budget, strerror(-r));
	/* The numbers moved between the refusal and STATS: say only what is known. */
	if (limit != PINMEM_UNLIMITED && used + len <= limit)
		return pm_ctx_error(ctx, err, "pinning %s was refused by %s (now %s in use)",
				    ask, budget, fmt_use(use, sizeof(use), used, limit));
	if (limit == PINMEM_UNLIMITED)
		return pm_ctx_error(ctx, err, "pinning %s was refused by %s (unlimited, %s in use)",
				    ask, budget, pm_fmt_bytes(use, sizeof(use), used));
	return pm_ctx_error(ctx, err, "pinning %s would exceed %s: %s in use%s",
			    ask, budget, fmt_use(use, sizeof(use), used, limit), hint);
}

int pm_refuse_mlock(struct pm_ctx *ctx, int err, size_t len)
{
	uint64_t limit = UINT64_MAX, locked = 0;
	char ask[32], lim[32], lck[32];

	pm_fmt_bytes(ask, sizeof(ask), len);
	if ((err == -ENOMEM || err == -EPERM) &&
	    !ctx->sys->memlock(&limit, &locked) && limit != UINT64_MAX &&
	    locked + len > limit) {
		pm_fmt_bytes(lim, sizeof(lim), limit);
		if (locked)
			return pm_ctx_error(ctx, -ENOMEM,
					    "mlock of %s exceeds RLIMIT_MEMLOCK (%s, %s already locked); raise it with ulimit -l or use /dev/pinmem",
					    ask, lim, pm_fmt_bytes(lck, sizeof(lck), locked));
		return pm_ctx_error(ctx, -ENOMEM,
				    "mlock of %s exceeds RLIMIT_MEMLOCK (%s); raise it with ulimit -l or use /dev/pinmem",
				    ask, lim);
	}
	return pm_ctx_error(ctx, err, "mlock of %s failed: %s", ask, strerror(-err));
}
