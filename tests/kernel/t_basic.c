// SPDX-License-Identifier: MIT
/* Round trip: GET_VERSION. (bring-up; grows into the full round-trip test) */
#include <unistd.h>
#include "common.h"

int main(void)
{
	struct pinmem_version v = { 0 };
	int fd = kt_open();

	kt_eq(kt_ioctl(fd, PINMEM_IOC_GET_VERSION, &v), 0, "GET_VERSION");
	kt_eq(v.abi_major, PINMEM_ABI_MAJOR, "abi_major");
	kt_eq(v.page_size, sysconf(_SC_PAGESIZE), "page_size");
	close(fd);
	return kt_done();
}
