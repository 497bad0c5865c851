/* SPDX-License-Identifier: MIT */
/* Choosing and applying the pin mode: module > mlock > none (lib/pin.c). */
#ifndef PM_PIN_H
#define PM_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinmem.h"
#include "sys.h"

/* What pinning needs: the system calls and the module, if any. */
struct pm_pinner {
	const struct pm_sys_ops *sys;
	int dev_fd;			/* -1: no module */
	uint32_t abi_minor;		/* the module's ABI minor version */
	const char *module_note;	/* why there is no module */
};

/* What a pin obtained. */
struct pm_pinned {
	enum pm_pin_mode mode;
	uint64_t handle;		/* module region, 0 if none */
	uint64_t segments;
	uint64_t huge_bytes;		/* from the module; 0 otherwise */
};

/*
 * Pin [ptr, ptr + len) with the best mode allowed into *out; a step down
 * is said in note.  0, or -errno with the sentence in err (a budget
 * refusal names the budget).
 */
int pm_pin(const struct pm_pinner *pn, void *ptr, size_t len, enum pm_pin_mode want,
	   bool strict, struct pm_pinned *out, char *note, size_t note_len,
	   char *err, size_t err_len);
/* Undo pm_pin of [ptr, ptr + len); p->mode becomes PM_PIN_NONE. */
void pm_unpin(const struct pm_pinner *pn, void *ptr, size_t len, struct pm_pinned *p);

#endif /* PM_PIN_H */
