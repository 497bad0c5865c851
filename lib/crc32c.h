/* SPDX-License-Identifier: MIT */
/* crc32c (Castagnoli), as iSCSI, ext4 and most dataset manifests use it. */
#ifndef PM_CRC32C_H
#define PM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a crc32c over buf; start with crc = 0.  SSE4.2 when the CPU has it. */
uint32_t pm_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
