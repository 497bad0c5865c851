# SPDX-License-Identifier: MIT
# The Python package `pinmem` (python/): `make python` builds it into
# $(O)/python (the C extension links $(O)/libpinmem.a statically), offline
# with Debian's python3-dev and python3-setuptools; `python-check` runs the
# pytest suite in tests/python against it; `bench-python` runs
# bench/dataloader-compare.py.  `make install` copies the package into
# PYTHON_SITEDIR (mk/70-install.mk).

PYTHON ?= python3
PY_OUT := $(O)/python
PY_STAMP := $(PY_OUT)/.built
PY_SRCS := $(wildcard python/setup.py python/src/*.c python/src/*.h python/pinmem/*.py)
PYTHON_MINOR := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
# Where Debian's python3 looks: /usr/lib/python3/dist-packages for the
# system, $(PREFIX)/lib/python3.N/dist-packages for /usr/local.
PYTHON_SITEDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(PYTHON_MINOR)/dist-packages)

.PHONY: python python-check bench-python
python: $(PY_STAMP)

$(PY_STAMP): $(PY_SRCS) $(LIBPINMEM_A) include/pinmem.h include/pinmem_stream.h
	@mkdir -p $(PY_OUT)
	cd python && PINMEM_LIBA=$(abspath $(LIBPINMEM_A)) $(PYTHON) setup.py -q build \
		--build-base $(abspath $(O))/python-build --build-lib $(abspath $(PY_OUT)) \
		build_ext --force
	touch $@

python-check: $(PY_STAMP)
	cd tests/python && PYTHONPATH=$(abspath $(PY_OUT)) PYTHONDONTWRITEBYTECODE=1 \
		$(PYTHON) -m pytest -q -p no:cacheprovider .

BENCH_PYTHON_ARGS ?=
bench-python: $(PY_STAMP)
	PYTHONPATH=$(abspath $(PY_OUT)) $(PYTHON) bench/dataloader-compare.py $(BENCH_PYTHON_ARGS)

CHECK_STEPS += python-check
