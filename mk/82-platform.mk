# SPDX-License-Identifier: MIT
# The platform matrix of the Python package.  Not a step of `make check`
# yet: on a 2-core machine it adds 35-50 minutes (and 18 + 36 minutes of
# chroot builds on a fresh one), past make check's hour, and unstable's
# Python 3.14 (forkserver workers) fails 8 tests whose datasets are local
# classes (issue #23).  Run it on its own:
#   make platform-check  the pytest suite (tests/python, with the CUDA
#                        stand-in when the toolkit's headers are here) on
#                        each of PLATFORMS, pinmem installed with pip into
#                        a venv: host = this Debian (12: Python 3.11, torch
#                        1.13), trixie (13: 3.13, torch 2.6) and sid
#                        (unstable: 3.14, torch 2.14) in debootstrap'd
#                        chroots cached in /var/cache/pinmem/platform
#                        (tests/platform/prepare.sh; the first run builds
#                        them: docs/python.md#tested-platforms).  One line
#                        per platform:
#                        platform: <distro> python X.Y torch A.B: N passed, M failed, K skipped
#   make clients-check   real clients on sid's packages, CPU only, offline
#                        (tests/platform/clients): HF Accelerate's prepare(),
#                        the HF Trainer, torchrun with gloo.
# Work trees and logs: $(O)/platform/<platform>[-clients]/.

PLATFORMS ?= host trixie sid
PLATFORM_ENV = O=$(abspath $(O)) PYTHON=$(PYTHON) PINMEM_CUDA=$(CUDA) CUDA_HOME=$(CUDA_HOME)

.PHONY: platform-check clients-check
# The chroots are prepared (built on the first run) in the background while
# the host's suite runs; run.sh waits for each (prepare.sh holds a lock).
platform-check:
	@mkdir -p $(O)/platform
	@for p in $(filter-out host,$(PLATFORMS)); do \
		tests/platform/prepare.sh $$p >$(O)/platform/$$p.prepare.out 2>&1 & done; \
	fail=; for p in $(PLATFORMS); do \
		$(PLATFORM_ENV) tests/platform/run.sh $$p >$(O)/platform/$$p.out 2>&1 || fail="$$fail $$p"; \
		grep '^platform: [^ ]* python ' $(O)/platform/$$p.out || \
			{ echo "platform: $$p: no result line"; fail="$$fail $$p"; }; \
	done; \
	for p in $$fail; do echo "--- $$p ($(O)/platform/$$p.out):"; tail -n 40 $(O)/platform/$$p.out; done; \
	[ -z "$$fail" ] || { echo "platform-check: failed on$$fail"; exit 1; }

clients-check:
	@mkdir -p $(O)/platform
	@$(PLATFORM_ENV) tests/platform/run.sh --clients sid >$(O)/platform/sid-clients.out 2>&1 || \
		{ tail -n 60 $(O)/platform/sid-clients.out; echo "clients-check: failed"; exit 1; }; \
	grep '^clients: ' $(O)/platform/sid-clients.out

# (not in CHECK_STEPS: see the header)
