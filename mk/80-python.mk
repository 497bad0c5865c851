# SPDX-License-Identifier: MIT
# The Python package `pinmem` (python/): `make python` builds it into
# $(O)/python (PYTHONPATH=$(O)/python uses it from the build tree) through
# python/setup.py and python/pyproject.toml, the package's one build
# definition, which pip uses too (mk/81-python-pip.mk): the extension is
# python/src/*.c with libpinmem's sources compiled into it and liburing.a
# linked in, offline with Debian's python3-dev and python3-setuptools.
# `python-check` runs the pytest suite in tests/python against a pip install
# of it (mk/82-platform.mk);
# `bench-python` runs bench/dataloader-compare.py.  `make install` copies the
# package into PYTHON_SITEDIR (mk/70-install.mk); the Debian package's
# python3-pinmem is that install.

# Debian's interpreter (its python3-dev, numpy, pytest, torch), not whatever
# python3 comes first in PATH (pyenv and virtualenv shims).
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
export PYTHON
PY_OUT := $(O)/python
PY_STAMP := $(PY_OUT)/.built
PY_SRCS := $(wildcard python/setup.py python/pyproject.toml python/src/*.c python/src/*.h \
	python/pinmem/*.py) $(LIB_SRCS) $(wildcard lib/*.h lib/stream/*.h include/*.h include/uapi/*.h)
# setup.py's environment: the Makefile's CUDA choice, warnings as errors,
# PY_URING: liburing linked in from liburing.a when it is there (auto,
# static) or from liburing.so (shared: the Debian package).
PY_URING ?= auto
PY_SETUP_ENV = PINMEM_CUDA=$(CUDA) CUDA_HOME=$(CUDA_HOME) PINMEM_WERROR=1 PINMEM_URING=$(PY_URING)
PYTHON_MINOR := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
# Where Debian's python3 looks: /usr/lib/python3/dist-packages for the
# system, $(PREFIX)/lib/python3.N/dist-packages for /usr/local.
PYTHON_SITEDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(PYTHON_MINOR)/dist-packages)

.PHONY: python python-check bench-python
python: $(PY_STAMP)

# setup.py rebuilds what changed (its objects in $(O)/python-build), and
# everything when the compiler or flags changed.
$(PY_STAMP): $(PY_SRCS)
	@mkdir -p $(PY_OUT)
	cd python && $(PY_SETUP_ENV) $(PYTHON) setup.py -q build \
		--build-base $(abspath $(O))/python-build --build-lib $(abspath $(PY_OUT))
	@! ls -d python/build python/*.egg-info 2>/dev/null || \
		{ echo "python: setup.py wrote the above into python/"; exit 1; }
	touch $@

# The cuda backend's cases run against the test-only CUDA runtime stand-in
# (tests/cuda_stub) when the toolkit's headers are there to build it.
PY_CUDA_STUB := $(if $(filter 1,$(CUDA)),$(CUDA_STUB))
# python-check is this machine's row of the platform matrix (mk/82-platform.mk):
# pinmem installed from a clean copy of the checkout with pip into a venv of
# $(PYTHON), the suite run against that install, then PyTorch's own
# test/test_dataloader.py of the installed torch's release (tests/python/torch_suite),
# with torch's loader and with pinmem's, compared test by test against the listed
# differences.  Logs: $(O)/platform/host/.
python-check:
	@mkdir -p $(O)/platform
	@$(PLATFORM_ENV) tests/platform/run.sh host >$(O)/platform/host.out 2>&1 || \
		{ tail -n 60 $(O)/platform/host.out; echo "python-check: failed (logs in $(O)/platform/host/)"; exit 1; }
	@grep '^torch-suite: \|^platform: ' $(O)/platform/host.out

BENCH_PYTHON_ARGS ?=
bench-python: $(PY_STAMP)
	PYTHONPATH=$(abspath $(PY_OUT)) $(PYTHON) bench/dataloader-compare.py $(BENCH_PYTHON_ARGS)

CHECK_STEPS += python-check

# The suite again with the extension and libpinmem built with ASan+UBSan
# (ASAN_FLAGS, mk/30-unit.mk) in $(O)/asan-py; the interpreter is not
# instrumented, so the runtimes are preloaded and leak checking is off (the
# interpreter's own allocations at exit would drown it).  Workers start with
# forkserver, as on Python 3.14: fork() from the threaded pytest process can
# deadlock a worker under GCC 12's libasan (tests/python/conftest.py).
PY_ASAN_O := $(O)/asan-py
.PHONY: python-check-asan
python-check-asan:
	+$(if $(PY_CUDA_STUB),$(MAKE) --no-print-directory O=$(PY_ASAN_O) CFLAGS="$(ASAN_FLAGS)" \
		$(PY_ASAN_O)/unit/libcudart_stub.so,true)
	cd python && CFLAGS="$(ASAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" \
		$(PY_SETUP_ENV) $(PYTHON) setup.py -q build \
		--build-base $(abspath $(PY_ASAN_O))/python-build --build-lib $(abspath $(PY_ASAN_O))/python
	cd tests/python && PYTHONPATH=$(abspath $(PY_ASAN_O))/python PYTHONDONTWRITEBYTECODE=1 \
		LD_PRELOAD="$$($(CC) -print-file-name=libasan.so):$$($(CC) -print-file-name=libubsan.so)" \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		PINMEM_CUDA_STUB=$(if $(PY_CUDA_STUB),$(abspath $(PY_ASAN_O))/unit/libcudart_stub.so) \
		PINMEM_TEST_START_METHOD=forkserver $(PYTHON) -m pytest -q -p no:cacheprovider .

CHECK_STEPS += python-check-asan

# `make install` / `make uninstall` include the package (mk/70-install.mk).
PY_EXT_SUFFIX := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_INST_FILES := $(notdir $(wildcard python/pinmem/*.py)) _pinmem$(PY_EXT_SUFFIX)
.PHONY: python-install python-uninstall
install: python-install
uninstall: python-uninstall

python-install: $(PY_STAMP)
	$(INSTALL) -d $(DESTDIR)$(PYTHON_SITEDIR)/pinmem
	$(INSTALL) -m 0644 $(addprefix $(PY_OUT)/pinmem/,$(PY_INST_FILES)) $(DESTDIR)$(PYTHON_SITEDIR)/pinmem/

python-uninstall:
	rm -f $(addprefix $(DESTDIR)$(PYTHON_SITEDIR)/pinmem/,$(PY_INST_FILES))
	rm -rf $(DESTDIR)$(PYTHON_SITEDIR)/pinmem/__pycache__
	rmdir $(DESTDIR)$(PYTHON_SITEDIR)/pinmem 2>/dev/null || true

# In the VM (tests/vm/run.sh): the suite with pinmem.ko loaded, on the
# kernels of `make vm-check` (not the debug kernel's run: an interpreter
# under KASAN would take most of its time).
PY_VM_ROOT := $(O)/vm/python-root
$(PY_VM_ROOT)/.built: $(PY_STAMP) tests/python/vm-root.sh $(wildcard tests/python/*.py)
	PYTHON=$(PYTHON) tests/python/vm-root.sh $(PY_VM_ROOT) $(PY_OUT)
	touch $@

$(O)/vm/pinmem-pytest: tests/python/vm-pytest.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@

vm-check: $(PY_VM_ROOT)/.built $(O)/vm/pinmem-pytest
vm-check: VM_EXTRA_TESTS += $(O)/vm/pinmem-pytest
vm-check: VM_EXTRA_ROOT += $(PY_VM_ROOT)
