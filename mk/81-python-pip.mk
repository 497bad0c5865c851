# SPDX-License-Identifier: MIT
# `make python-pip-check` (in make check): the Python package installed as a
# user installs it, offline, from a clean copy of the checkout: pip install
# ./python into a venv, pip wheel and the wheel into a second venv with a
# smoke test, an sdist's wheel, pip uninstall leaving nothing, and
# python/setup.py compiling exactly LIB_SRCS (tests/python-pip/pip-check.sh).
# The commands it runs are the README's:
#   python3 -m venv --system-site-packages venv
#   venv/bin/pip install --no-build-isolation --no-index ./python

.PHONY: python-pip-check
python-pip-check:
	@echo "tests/python-pip/pip-check.sh (PYTHON=$(PYTHON), CUDA=$(CUDA))"
	@PYTHON=$(PYTHON) LIB_SRCS="$(LIB_SRCS)" PINMEM_CUDA=$(CUDA) CUDA_HOME=$(CUDA_HOME) \
		tests/python-pip/pip-check.sh

CHECK_STEPS += python-pip-check
