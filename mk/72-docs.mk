# SPDX-License-Identifier: MIT
# Documentation that cannot drift from the programs, and the demo's ending:
#   make man-check    every man page's options and SYNOPSIS against its
#                     program's --help (tests/docs/man-help.py)
#   make demo-check   a small `make demo` ends with its three closing lines
#                     (what the fastest row means for a training job, what
#                     pinmem picks here, what to try next)
#   readme-check      (tests/install/readme-commands.sh, mk/70-install.mk) covers
#                     docs/*.md too and runs their command blocks; here it gets
#                     the Python package it runs their python blocks with

.PHONY: man-check demo-check

man-check: $(O)/pinctl $(O)/pinstream
	$(PYTHON) tests/docs/man-help.py $(O)

# The demo as `make demo` runs it, on a dataset small enough for a check.
demo-check:
	@set -e; out=$$($(MAKE) --no-print-directory demo DEMO_SIZE=32M DEMO_FILES=4 2>&1) || \
		{ printf '%s\n' "$$out"; echo "demo-check: make demo failed"; exit 1; }; \
	tail=$$(printf '%s\n' "$$out" | tail -n 3); printf '%s\n' "$$tail"; \
	printf '%s\n' "$$tail" | sed -n 1p | grep -q '^for a training job: the fastest row, ([a-e]) .* batch every [0-9.]* ms' && \
	printf '%s\n' "$$tail" | sed -n 2p | grep -q '^pinmem here: slots pinned .*; reads ' && \
	printf '%s\n' "$$tail" | sed -n 3p | grep -q '^next: .*pinstream --manifest.*pinmem.torch.DataLoader' || \
		{ echo "demo-check: make demo does not end with its three closing lines"; exit 1; }; \
	echo "demo-check: OK"

CHECK_STEPS += man-check demo-check

# readme-check (mk/70-install.mk) also runs the python blocks of docs/*.md,
# with the package `make python` builds.
readme-check: $(O)/python/.built
