// SPDX-License-Identifier: MIT
/*
 * Choosing and applying the pin mode.  The order is module > mlock > none.
 * A mode steps down only when it is unavailable (no usable module, or a
 * mapping the module cannot pin); a budget refusal is an error with a
 * sentence naming the budget, because stepping around a budget would
 * defeat it.  PM_PIN_AUTO never ends in PM_PIN_NONE.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "pin.h"
#include "refusal.h"

/*
 * 0, or the PIN's -errno with the reason the module wrote back in *reason
 * (ABI 1.1) and, for a module without reasons, the counters from just
 * before it in *before.
 */
static int pin_module(const struct pm_pinner *pn, void *ptr, size_t len,
		      struct pm_pinned *out, struct pinmem_stats *before,
		      bool *have_before, uint32_t *reason)
{
	struct pinmem_pin p;
	int r;

	memset(before, 0, sizeof(*before));
	*have_before = pn->abi_minor < 1 &&
		       !pn->sys->ioctl(pn->dev_fd, PINMEM_IOC_STATS, before);
	memset(&p, 0, sizeof(p));
	p.addr = (uintptr_t)ptr;
	p.length = len;
	r = pn->sys->ioctl(pn->dev_fd, PINMEM_IOC_PIN, &p);
	*reason = p.refused;
	if (r)
		return r;
	out->handle = p.handle;
	out->segments = p.segments;
	out->huge_bytes = p.huge_bytes;
	out->mode = PM_PIN_MODULE;
	return 0;
}

static int pin_mlock(const struct pm_pinner *pn, void *ptr, size_t len,
		     struct pm_pinned *out, char *err, size_t err_len)
{
	int r = pn->sys->mlock(ptr, len);

	if (r) {
		/* mlock may have locked a prefix before failing. */
		pn->sys->munlock(ptr, len);
		return pm_refusal_mlock(pn->sys, r, len, err, err_len);
	}
	out->mode = PM_PIN_MLOCK;
	return 0;
}

int pm_pin(const struct pm_pinner *pn, void *ptr, size_t len, enum pm_pin_mode want,
	   bool strict, struct pm_pinned *out, char *note, size_t note_len,
	   char *err, size_t err_len)
{
	struct pinmem_stats before;
	bool have_before;
	uint32_t reason;
	int r;

	out->mode = PM_PIN_NONE;
	if (want == PM_PIN_NONE)
		return 0;
	if (want == PM_PIN_MLOCK)
		return pin_mlock(pn, ptr, len, out, err, err_len);

	if (pn->dev_fd < 0) {
		if (strict && want == PM_PIN_MODULE) {
			snprintf(err, err_len,
				 "module pinning was asked for strictly but the module is unusable: %s",
				 pn->module_note);
			return -ENODEV;
		}
		pm_note_add(note, note_len, "no module (%s): used mlock", pn->module_note);
		return pin_mlock(pn, ptr, len, out, err, err_len);
	}
	r = pin_module(pn, ptr, len, out, &before, &have_before, &reason);
	if (!r)
		return 0;
	if (r != -EOPNOTSUPP || (strict && want == PM_PIN_MODULE))
		return pm_refusal_module(pn->sys, pn->dev_fd, r, len,
					 have_before ? &before : NULL, reason, err, err_len);
	pm_note_add(note, note_len, "/dev/pinmem cannot pin this mapping (%s): used mlock",
		    strerror(-r));
	return pin_mlock(pn, ptr, len, out, err, err_len);
}

void pm_unpin(const struct pm_pinner *pn, void *ptr, size_t len, struct pm_pinned *p)
{
	struct pinmem_unpin u;

	if (p->mode == PM_PIN_MODULE) {
		memset(&u, 0, sizeof(u));
		u.handle = p->handle;
		pn->sys->ioctl(pn->dev_fd, PINMEM_IOC_UNPIN, &u);
		p->handle = 0;
	} else if (p->mode == PM_PIN_MLOCK) {
		pn->sys->munlock(ptr, len);
	}
	p->mode = PM_PIN_NONE;
}
