// SPDX-License-Identifier: MIT
/*
 * Built by tests/install/install-check.sh against the *installed* header and
 * library (pkg-config), shared and static: proves a user can link libpinmem
 * from a `make install` tree alone.  Allocates a small buffer with
 * PM_PIN_AUTO and prints the pin mode it got.
 */
#include <pinmem.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	struct pm_buf_opts bopts = { .pin = PM_PIN_AUTO };
	struct pm_ctx *ctx;
	struct pm_buf *buf;
	int ret;

	ret = pm_open(&ctx, NULL);
	if (ret < 0) {
		fprintf(stderr, "hello: pm_open: %s\n", strerror(-ret));
		return 1;
	}
	ret = pm_buf_alloc(ctx, 1 << 20, &bopts, &buf);
	if (ret < 0) {
		fprintf(stderr, "hello: pm_buf_alloc: %s: %s\n", strerror(-ret),
			pm_ctx_last_error(ctx));
		pm_close(ctx);
		return 1;
	}
	memset(pm_buf_ptr(buf), 0xa5, pm_buf_size(buf));
	printf("hello: %zu bytes, pin mode %s\n", pm_buf_size(buf),
	       pm_pin_mode_name(pm_buf_pin_mode(buf)));
	ret = pm_buf_free(ctx, buf);
	pm_close(ctx);
	if (ret < 0) {
		fprintf(stderr, "hello: pm_buf_free: %s\n", strerror(-ret));
		return 1;
	}
	return 0;
}
