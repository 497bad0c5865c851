# SPDX-License-Identifier: MIT
# The install rules and `make check` leave the machine as they found it
# (tests/install/install-guard.sh):
#   make install-guard   make install / uninstall / dkms-install-src /
#                        dkms-uninstall-src into a scratch DESTDIR in a mount
#                        namespace where all else is read-only: nothing
#                        written or chmod'ed outside DESTDIR and $(O);
#                        /dev/null, /dev/zero, /tmp and the system
#                        directories keep type, mode, owner.  Its selftest
#                        first shows the sandbox catches a bad rule.
# `make check` also records those system paths before its first step
# (check-guard-begin) and compares after its last (check-guard-end), so
# deb-check, dkms and the VM steps are held to the same rule.

INSTALL_GUARD_SNAPSHOT := $(O)/install-guard/before-check

.PHONY: install-guard check-guard-begin check-guard-end
install-guard: $(PM_INST_LIBSO) $(PM_INST_LIBA) $(PM_INST_BINS)
	tests/install/install-guard.sh selftest
	+O=$(O) MAKE="$(MAKE)" tests/install/install-guard.sh

check-guard-begin:
	@mkdir -p $(dir $(INSTALL_GUARD_SNAPSHOT))
	tests/install/install-guard.sh snapshot $(INSTALL_GUARD_SNAPSHOT)

check-guard-end:
	tests/install/install-guard.sh compare $(INSTALL_GUARD_SNAPSHOT)

CHECK_STEPS := check-guard-begin $(CHECK_STEPS) install-guard
# A target-specific append lands after every mk file's steps.
check: CHECK_STEPS += check-guard-end
