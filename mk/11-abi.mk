# SPDX-License-Identifier: MIT
# The library's ABI: `make abi-check` fails when the symbols the headers
# declare (PM_API), the version script's list (lib/libpinmem.map) and what
# the built libpinmem.so exports (all in node PINMEM_*) are not one set, so
# a new call cannot ship unexported or unversioned and none vanishes
# unnoticed.  The layout of the option and stats structs is pinned by
# tests/unit/test_abi.c.

.PHONY: abi-check
abi-check: $(LIBPINMEM_SO)
	@set -e; t=$$(mktemp -d); trap 'rm -rf "$$t"' EXIT; \
	grep -ho '^PM_API[^(]*(' include/pinmem.h include/pinmem_stream.h | \
		sed 's/.*[ *]\([a-z_0-9]*\)(/\1/' | sort >$$t/headers; \
	sed -n 's/^[[:space:]]*\(pm_[a-z_0-9]*\);.*/\1/p' lib/libpinmem.map | sort >$$t/map; \
	nm -D --defined-only $(LIBPINMEM_SO) | awk '$$2 ~ /^[TDBRVW]$$/ && $$3 !~ /^PINMEM_/ { print $$3 }' | \
		sed 's/@.*//' | sort >$$t/so; \
	objdump -T $(LIBPINMEM_SO) | awk '/ pm_/ && $$(NF-1) !~ /^PINMEM_/ { print $$NF }' >$$t/unversioned; \
	ok=1; \
	if ! diff -u $$t/headers $$t/map >$$t/d1; then echo "abi-check: headers' PM_API calls vs lib/libpinmem.map:"; cat $$t/d1; ok=0; fi; \
	if ! diff -u $$t/map $$t/so >$$t/d2; then echo "abi-check: lib/libpinmem.map vs $(LIBPINMEM_SO) exports:"; cat $$t/d2; ok=0; fi; \
	if [ -s $$t/unversioned ]; then echo "abi-check: exported without a PINMEM_ version: $$(cat $$t/unversioned)"; ok=0; fi; \
	[ $$ok = 1 ]; echo "abi-check: $$(wc -l <$$t/map) symbols: headers = lib/libpinmem.map = $(LIBPINMEM_SO) exports, all versioned"

CHECK_STEPS += abi-check
