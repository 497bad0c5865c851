# SPDX-License-Identifier: MIT
# Debian packages.
#   make deb        pinmem-dkms, libpinmem0, libpinmem-dev, pinmem-tools and,
#                   when python/ exists, python3-pinmem, into $(O)/deb/, with
#                   debhelper and dh-dkms (packaging/debian/); the version is
#                   VERSION's; any lintian error fails it.
#   make deb-check  `make deb`, then installs the packages with apt on this
#                   machine, checks them, and purges them
#                   (tests/install/deb-check.sh; root).
# The packages are built from a copy of the tree in $(DEB_SRC), so the
# checkout never gets a debian/ directory or the package build's objects.

DEB_DIR := $(O)/deb
DEB_SRC := $(DEB_DIR)/pinmem-$(VERSION)
# python3-pinmem is built when the Python package is there.
DEB_PROFILES := $(if $(wildcard python/),,nopython)
DEB_MAINTAINER = $(shell sed -n 's/^Maintainer: //p' packaging/debian/control)

.PHONY: deb deb-check
deb:
	scripts/install-deps.sh --deb
	rm -rf $(DEB_DIR)
	@mkdir -p $(DEB_SRC)
	@# Tracked and not-ignored files when this is a git checkout, else all
	@# but the build directory.
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files -z -co --exclude-standard | \
		xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' sh | \
		tar --null -T - -cf - ; \
	else tar --exclude=./$(O) --exclude=./.git -cf - . ; fi | tar -C $(DEB_SRC) -xf -
	rm -rf $(DEB_SRC)/debian $(DEB_SRC)/$(O)
	cp -r packaging/debian $(DEB_SRC)/debian
	@# The changelog says VERSION; its date is the last commit's (reproducible).
	@t=$$(git log -1 --format=%ct 2>/dev/null || date +%s); \
	{ echo "pinmem ($(VERSION)) unstable; urgency=medium"; echo; \
	  echo "  * Packages of pinmem $(VERSION), built by make deb."; echo; \
	  echo " -- $(DEB_MAINTAINER)  $$(date -u -R -d @$$t)"; } > $(DEB_SRC)/debian/changelog
	cd $(DEB_SRC) && DEB_BUILD_OPTIONS="$(DEB_BUILD_OPTIONS) noautodbgsym" \
		dpkg-buildpackage -b -us -uc -J $(if $(DEB_PROFILES),-P$(DEB_PROFILES))
	lintian --fail-on error \
		$(DEB_DIR)/pinmem_$(VERSION)_$$(dpkg --print-architecture).changes
	@ls $(DEB_DIR)/*.deb

deb-check:
	+VERSION=$(VERSION) MAKE="$(MAKE)" O=$(O) tests/install/deb-check.sh

CHECK_STEPS += deb-check
