/* SPDX-License-Identifier: MIT */
/* crc32c (Castagnoli), as iSCSI, ext4 and most dataset manifests use it. */
#ifndef PM_CRC32C_H
#define PM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#include "pinmem_stream.h"	/* pm_crc32c(): SSE4.2 when the CPU has it */

/* The table-driven version, whatever the CPU has (tests compare the two). */
uint32_t pm_crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif
