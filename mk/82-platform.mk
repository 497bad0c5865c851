# SPDX-License-Identifier: MIT
# The platform matrix of the Python package, in make check:
#   make python-check    this machine's row (mk/80-python.mk): `run.sh host`
#   make platform-check  the same on each of PLATFORMS: trixie (Debian 13:
#                        Python 3.13, torch 2.6) and sid (unstable: 3.14,
#                        torch 2.14), in debootstrap'd chroots cached in
#                        /var/cache/pinmem/platform (tests/platform/prepare.sh;
#                        a fresh machine builds them: about 18 and 36 minutes
#                        at once, docs/python.md#tested-platforms)
#   make clients-check   real clients on sid's packages, CPU only, offline
#                        (tests/platform/clients): HF Accelerate's prepare(),
#                        the HF Trainer, torchrun with gloo.
# Each row installs pinmem from a clean copy of the checkout with pip into a
# venv and runs the pytest suite (tests/python, with the CUDA stand-in when
# the toolkit's headers are here) against that install, then torch's own
# DataLoader suite of the row's torch release where it is vendored
# (tests/python/torch_suite).  One line each:
#   platform: <distro> python X.Y torch A.B: N passed, M failed, K skipped
#   torch-suite: torch A.B (suite A.B): ...   (or: not run, not vendored)
# Work trees and logs: $(O)/platform/<platform>[-clients]/.

PLATFORMS ?= trixie sid
PLATFORM_ENV = O=$(abspath $(O)) PYTHON=$(PYTHON) PINMEM_CUDA=$(CUDA) CUDA_HOME=$(CUDA_HOME)

.PHONY: platform-prepare platform-check clients-check
# The chroots are prepared (built when their inputs changed, ~40 minutes on a
# fresh machine) in the background from the start of make check, beside its
# other steps; run.sh waits for each (prepare.sh holds a lock) and reuses it.
check: platform-prepare
platform-prepare: deps
	@mkdir -p $(O)/platform
	@for p in $(filter-out host,$(PLATFORMS)); do \
		nohup tests/platform/prepare.sh $$p >$(O)/platform/$$p.prepare.out 2>&1 </dev/null & done; \
	echo "platform-prepare: the $(filter-out host,$(PLATFORMS)) chroots, in the background (logs $(O)/platform/*.prepare.out)"

platform-check:
	@mkdir -p $(O)/platform
	@for p in $(filter-out host,$(PLATFORMS)); do \
		tests/platform/prepare.sh $$p >>$(O)/platform/$$p.prepare.out 2>&1 & done; \
	fail=; for p in $(PLATFORMS); do \
		$(PLATFORM_ENV) tests/platform/run.sh $$p >$(O)/platform/$$p.out 2>&1 || fail="$$fail $$p"; \
		grep '^torch-suite: ' $(O)/platform/$$p.out; \
		grep '^platform: [^ ]* python ' $(O)/platform/$$p.out || { echo "platform: $$p: no result line"; \
			case " $$fail " in *" $$p "*) ;; *) fail="$$fail $$p" ;; esac; }; \
	done; \
	for p in $$fail; do echo "--- $$p ($(O)/platform/$$p.out; the chroot's: $(O)/platform/$$p.prepare.out):"; \
		tail -n 40 $(O)/platform/$$p.out; done; \
	[ -z "$$fail" ] || { echo "platform-check: failed on$$fail"; exit 1; }

clients-check:
	@mkdir -p $(O)/platform
	@$(PLATFORM_ENV) tests/platform/run.sh --clients sid >$(O)/platform/sid-clients.out 2>&1 || \
		{ tail -n 60 $(O)/platform/sid-clients.out; echo "clients-check: failed"; exit 1; }; \
	grep '^clients: ' $(O)/platform/sid-clients.out

CHECK_STEPS += platform-check clients-check
