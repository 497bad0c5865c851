# SPDX-License-Identifier: MIT
# `make install` / `make uninstall` (PREFIX, DESTDIR), `make dkms-install-src`
# (the module source for DKMS), and the checks that what gets installed works:
# version-check, install-check, dkms-check, readme-check, and deps-check
# (scripts/install-deps.sh).  mk/71-install-guard.mk checks that these rules
# touch nothing outside DESTDIR and $(O) (/dev/null above all).
#
# Layout under $(DESTDIR)$(PREFIX) (PREFIX defaults to /usr/local):
#   bin/pinctl bin/pinstream
#   lib/libpinmem.so.$(VERSION) lib/libpinmem.so.0 lib/libpinmem.so lib/libpinmem.a
#   lib/pkgconfig/pinmem.pc
#   include/pinmem.h include/pinmem_stream.h include/pinmem/uapi/pinmem.h
#   share/man/manN/*.N
#   lib/python3.N/dist-packages/pinmem/ (mk/80-python.mk; /usr/lib/python3/dist-packages with PREFIX=/usr)
#   lib/udev/rules.d/60-pinmem.rules  lib/modules-load.d/pinmem.conf
#   lib/modprobe.d/pinmem.conf        lib/sysusers.d/pinmem.conf
#   lib/systemd/system/pinmem-limits.service, pinmem-metrics.service and
#   pinmem-metrics.timer (not enabled; ExecStart names $(BINDIR)/pinctl)
# systemd-udevd, systemd-modules-load, kmod, systemd-sysusers and systemd read
# those last five directories under /usr/lib and /usr/local/lib alike; with
# another PREFIX set SYSTEMLIBDIR=/usr/lib (or the single *DIR variables).

BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SYSTEMLIBDIR ?= $(PREFIX)/lib
UDEVRULESDIR ?= $(SYSTEMLIBDIR)/udev/rules.d
MODULESLOADDIR ?= $(SYSTEMLIBDIR)/modules-load.d
MODPROBEDIR ?= $(SYSTEMLIBDIR)/modprobe.d
SYSUSERSDIR ?= $(SYSTEMLIBDIR)/sysusers.d
SYSTEMDUNITDIR ?= $(SYSTEMLIBDIR)/systemd/system
DKMSSRCDIR ?= /usr/src/pinmem-$(VERSION)
INSTALL ?= install

# What the other parts build (see mk/10-lib.mk, mk/20-pinctl.mk, mk/21-pinstream.mk).
PM_INST_LIBSO := $(LIBPINMEM_SO)
PM_INST_LIBA := $(LIBPINMEM_A)
PM_INST_BINS := $(O)/pinctl $(O)/pinstream
PM_INST_HEADERS := $(wildcard include/pinmem.h include/pinmem_stream.h)
PM_INST_MANS := $(wildcard man/*.[1-8])

# Every file `make install` writes, relative to $(DESTDIR); uninstall removes these.
PM_INSTALLED := \
	$(LIBDIR)/libpinmem.so.$(VERSION) $(LIBDIR)/libpinmem.so.$(PM_SOVERSION) \
	$(LIBDIR)/libpinmem.so $(LIBDIR)/libpinmem.a $(PKGCONFIGDIR)/pinmem.pc \
	$(addprefix $(INCLUDEDIR)/,$(notdir $(PM_INST_HEADERS))) \
	$(INCLUDEDIR)/pinmem/uapi/pinmem.h \
	$(addprefix $(BINDIR)/,$(notdir $(PM_INST_BINS))) \
	$(foreach m,$(PM_INST_MANS),$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
	$(UDEVRULESDIR)/60-pinmem.rules $(MODULESLOADDIR)/pinmem.conf \
	$(MODPROBEDIR)/pinmem.conf $(SYSUSERSDIR)/pinmem.conf \
	$(SYSTEMDUNITDIR)/pinmem-limits.service $(SYSTEMDUNITDIR)/pinmem-metrics.service \
	$(SYSTEMDUNITDIR)/pinmem-metrics.timer

# The module source DKMS needs: the Kbuild entry, kmod/ (with conftest.sh,
# but not the compat header it generates), the uapi header, VERSION.
PM_DKMS_SRCS := $(filter-out kmod/pinmem_compat.h,$(KMOD_SOURCES))

.PHONY: install uninstall dkms-install-src dkms-uninstall-src \
	version-check install-check dkms-check readme-check deps-check

# mk/10-lib.mk's pinmem.pc moved to the paths of this install (PREFIX,
# LIBDIR, INCLUDEDIR given to `make install` rather than to the build).
$(O)/install/pinmem.pc: $(O)/pinmem.pc FORCE
	@mkdir -p $(@D)
	sed -e 's|^prefix=.*|prefix=$(PREFIX)|' -e 's|^libdir=.*|libdir=$(LIBDIR)|' \
		-e 's|^includedir=.*|includedir=$(INCLUDEDIR)|' $< > $@.tmp && mv $@.tmp $@

install: $(PM_INST_LIBSO) $(PM_INST_LIBA) $(PM_INST_BINS) $(O)/install/pinmem.pc
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BINDIR) \
		$(DESTDIR)$(INCLUDEDIR)/pinmem/uapi $(DESTDIR)$(UDEVRULESDIR) \
		$(DESTDIR)$(MODULESLOADDIR) $(DESTDIR)$(MODPROBEDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(SYSTEMDUNITDIR)
	$(INSTALL) -m 0644 $(PM_INST_LIBSO) $(DESTDIR)$(LIBDIR)/libpinmem.so.$(VERSION)
	ln -sf libpinmem.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libpinmem.so.$(PM_SOVERSION)
	ln -sf libpinmem.so.$(PM_SOVERSION) $(DESTDIR)$(LIBDIR)/libpinmem.so
	$(INSTALL) -m 0644 $(PM_INST_LIBA) $(DESTDIR)$(LIBDIR)/libpinmem.a
	$(INSTALL) -m 0644 $(O)/install/pinmem.pc $(DESTDIR)$(PKGCONFIGDIR)/pinmem.pc
	$(INSTALL) -m 0644 $(PM_INST_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 0644 include/uapi/pinmem.h $(DESTDIR)$(INCLUDEDIR)/pinmem/uapi/pinmem.h
	$(INSTALL) -m 0755 $(PM_INST_BINS) $(DESTDIR)$(BINDIR)/
	$(foreach m,$(PM_INST_MANS),$(INSTALL) -D -m 0644 $(m) \
		$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)) &&) true
	$(INSTALL) -m 0644 packaging/udev/60-pinmem.rules $(DESTDIR)$(UDEVRULESDIR)/
	$(INSTALL) -m 0644 packaging/modules-load.d/pinmem.conf $(DESTDIR)$(MODULESLOADDIR)/
	$(INSTALL) -m 0644 packaging/modprobe.d/pinmem.conf $(DESTDIR)$(MODPROBEDIR)/
	$(INSTALL) -m 0644 packaging/sysusers.d/pinmem.conf $(DESTDIR)$(SYSUSERSDIR)/
	for u in pinmem-limits.service pinmem-metrics.service; do \
		sed 's|/usr/bin/pinctl|$(BINDIR)/pinctl|' packaging/systemd/$$u \
			> $(DESTDIR)$(SYSTEMDUNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u || exit 1; done
	$(INSTALL) -m 0644 packaging/systemd/pinmem-metrics.timer $(DESTDIR)$(SYSTEMDUNITDIR)/
ifeq ($(DESTDIR),)
	@# A real install (not a staging DESTDIR) by root: refresh the linker
	@# cache and create the pinmem group now rather than at the next boot.
	@if [ "$$(id -u)" = 0 ]; then ldconfig; \
		command -v systemd-sysusers >/dev/null && \
		systemd-sysusers $(SYSUSERSDIR)/pinmem.conf || true; fi
endif

uninstall:
	rm -f $(addprefix $(DESTDIR),$(PM_INSTALLED))
	rmdir $(DESTDIR)$(INCLUDEDIR)/pinmem/uapi $(DESTDIR)$(INCLUDEDIR)/pinmem 2>/dev/null || true
ifeq ($(DESTDIR),)
	@if [ "$$(id -u)" = 0 ]; then ldconfig; fi
endif

# /usr/src/pinmem-$(VERSION) for `dkms add pinmem/$(VERSION)`; dkms.conf gets
# the VERSION file's version whatever the checked-in copy says.
dkms-install-src: $(PM_DKMS_SRCS) dkms.conf
	rm -rf $(DESTDIR)$(DKMSSRCDIR)
	$(INSTALL) -d $(DESTDIR)$(DKMSSRCDIR)
	@# Each file gets its mode as it is installed (scripts 0755): no chmod
	@# with a filler argument, which as root once made /dev/null 0755.
	$(foreach f,$(PM_DKMS_SRCS),$(INSTALL) -D -m $(if $(filter %.sh,$(f)),0755,0644) \
		$(f) $(DESTDIR)$(DKMSSRCDIR)/$(f) &&) true
	sed 's|^PACKAGE_VERSION=.*|PACKAGE_VERSION="$(VERSION)"|' dkms.conf > $(DESTDIR)$(DKMSSRCDIR)/dkms.conf

dkms-uninstall-src:
	rm -rf $(DESTDIR)$(DKMSSRCDIR)

# PM_CFLAGS carries -DPINMEM_VERSION from VERSION, so a version bump must
# rebuild what is compiled with it (kbuild notices its own flags change).
$(LIB_OBJS) $(PINCTL_OBJS) $(O)/tools/pinctl/pinctl_main.o $(PINSTREAM_OBJS): VERSION

# One version everywhere: VERSION -> module, library, tools, dkms.conf,
# pinmem.pc.  The modules `make kmod` built are checked when present
# (kmod-all runs earlier in `make check`); dkms-check checks its own.
version-check: $(PM_INST_LIBSO) $(PM_INST_BINS) $(O)/install/pinmem.pc
	VERSION=$(VERSION) SOVERSION=$(PM_SOVERSION) LIBSO=$(PM_INST_LIBSO) \
		PC=$(O)/install/pinmem.pc BINS="$(PM_INST_BINS)" \
		KOS="$(wildcard $(O)/kmod/*/pinmem.ko)" scripts/version-check

install-check: $(PM_INST_LIBSO) $(PM_INST_LIBA) $(PM_INST_BINS)
	+O=$(O) VERSION=$(VERSION) MAKE="$(MAKE)" tests/install/install-check.sh

dkms-check:
	+VERSION=$(VERSION) MAKE="$(MAKE)" tests/install/dkms-check.sh

# scripts/install-deps.sh's choices, against stand-ins for apt-get/dpkg-query.
deps-check:
	tests/install/deps-check.sh

readme-check: $(PM_INST_LIBSO) $(PM_INST_LIBA)
	+O=$(O) VERSION=$(VERSION) MAKE="$(MAKE)" tests/install/readme-commands.sh

# dkms-check is not a step: deb-check (mk/75-deb.mk) puts the same
# dkms-install-src tree through dkms add/build/install for every kernel, on
# the system's trees, with the same checks (tests/install/dkms-lib.sh).
CHECK_STEPS += deps-check version-check install-check readme-check

.PHONY: FORCE
FORCE:
