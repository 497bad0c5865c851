// SPDX-License-Identifier: MIT
/*
 * Choosing and applying the pin mode.  The order is module > mlock > none.
 * A mode steps down only when it is unavailable (no usable module, or a
 * mapping the module cannot pin); a budget refusal is an error with a
 * sentence naming the budget, because stepping around a budget would defeat
 * it.  PM_PIN_AUTO never ends in PM_PIN_NONE.
 */
#include <errno.h>
#include <string.h>

#include "buf.h"

/*
 * 0, or the PIN's -errno with the reason the module wrote back in *reason
 * (ABI 1.1) and, for a module without reasons, the counters from just
 * before it in *before.
 */
static int pin_module(struct pm_ctx *ctx, struct pm_buf *b,
		      struct pinmem_stats *before, bool *have_before,
		      uint32_t *reason)
{
	struct pinmem_pin p;
	int r;

	memset(before, 0, sizeof(*before));
	*have_before = ctx->ver.abi_minor < 1 &&
		       !ctx->sys->ioctl(ctx->dev_fd, PINMEM_IOC_STATS, before);
	memset(&p, 0, sizeof(p));
	p.addr = (uintptr_t)b->ptr;
	p.length = b->size;
	r = ctx->sys->ioctl(ctx->dev_fd, PINMEM_IOC_PIN, &p);
	*reason = p.refused;
	if (r)
		return r;
	b->handle = p.handle;
	b->segments = p.segments;
	b->huge_bytes = p.huge_bytes;
	b->pin = PM_PIN_MODULE;
	return 0;
}

static int pin_mlock(struct pm_ctx *ctx, struct pm_buf *b)
{
	int r = ctx->sys->mlock(b->ptr, b->size);

	if (r) {
		/* mlock may have locked a prefix before failing. */
		ctx->sys->munlock(b->ptr, b->size);
		return pm_refuse_mlock(ctx, r, b->size);
	}
	b->pin = PM_PIN_MLOCK;
	return 0;
}

int pm_pin(struct pm_ctx *ctx, struct pm_buf *b, enum pm_pin_mode want,
	   bool strict)
{
	struct pinmem_stats before;
	bool have_before;
	uint32_t reason;
	int r;

	b->pin = PM_PIN_NONE;
	if (want == PM_PIN_NONE)
		return 0;
	if (want == PM_PIN_MLOCK)
		return pin_mlock(ctx, b);

	if (ctx->dev_fd < 0) {
		if (strict && want == PM_PIN_MODULE)
			return pm_ctx_error(ctx, -ENODEV,
					    "module pinning was asked for strictly but the module is unusable: %s",
					    ctx->module_note);
		pm_buf_add_note(b, "no module (%s): used mlock", ctx->module_note);
		return pin_mlock(ctx, b);
	}
	r = pin_module(ctx, b, &before, &have_before, &reason);
	if (!r)
		return 0;
	if (r != -EOPNOTSUPP || (strict && want == PM_PIN_MODULE))
		return pm_refuse_module(ctx, r, b->size, have_before ? &before : NULL,
					reason);
	pm_buf_add_note(b, "/dev/pinmem cannot pin this mapping (%s): used mlock",
		    strerror(-r));
	return pin_mlock(ctx, b);
}

void pm_unpin(struct pm_ctx *ctx, struct pm_buf *b)
{
	struct pinmem_unpin u;

	if (b->pin == PM_PIN_MODULE) {
		memset(&u, 0, sizeof(u));
		u.handle = b->handle;
		ctx->sys->ioctl(ctx->dev_fd, PINMEM_IOC_UNPIN, &u);
		b->handle = 0;
	} else if (b->pin == PM_PIN_MLOCK) {
		ctx->sys->munlock(b->ptr, b->size);
	}
	b->pin = PM_PIN_NONE;
}
