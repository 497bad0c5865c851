// SPDX-License-Identifier: MIT
/* The library's version, from VERSION (one version everywhere, mk/70-install.mk). */
#include "pinmem.h"

const char *pm_version(void)
{
	return PINMEM_VERSION;
}
