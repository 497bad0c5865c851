#!/bin/sh
# SPDX-License-Identifier: MIT
# One platform of the Python matrix (tests/platform/run.sh runs it, in a
# platform chroot or on the host): installs pinmem the way a user does, with
# pip into a venv, offline, and runs the pytest suite (tests/python) against
# that install, or with --clients the real clients' checks
# (tests/platform/clients).
#
#   suite.sh [--clients] WORK PYTHON DISTRO
#
# Without --clients, torch's own DataLoader suite of the platform's torch
# release follows (tests/python/torch_suite/run.py) where it is vendored.
# WORK holds a clean copy of the checkout in WORK/src; the venv, the CUDA
# stand-in's build and pytest's report and log go beside it.  PINMEM_CUDA=1
# (with CUDA_HOME) builds the extension's cuda backend and the stand-in
# (tests/cuda_stub), as `make python-check` does on a host with the
# toolkit's headers.  The last line of stdout is the platform's one line,
# from tests/platform/summary.py; the exit status says whether it passed.
set -eu

clients=0
[ "${1:-}" = --clients ] && { clients=1; shift; }
[ $# = 3 ] || { echo "usage: suite.sh [--clients] WORK PYTHON DISTRO" >&2; exit 2; }
work=$1 python=$2 distro=$3
cd "$work"
fail() { echo "platform: $distro: $*" >&2; exit 1; }

# pip as a user without network runs it (as tests/python-pip/pip-check.sh).
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PYTHONPATH 2>/dev/null || true
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
	PIP_ROOT_USER_ACTION=ignore
"$python" -m venv --system-site-packages venv >venv.log 2>&1 ||
	{ cat venv.log >&2; fail "$python -m venv --system-site-packages failed"; }
(cd src && PINMEM_WERROR=1 ../venv/bin/pip install --no-build-isolation --no-index \
	./python) >pip.log 2>&1 ||
	{ tail -n 30 pip.log >&2; fail "pip install --no-build-isolation --no-index ./python failed (log $work/pip.log)"; }

stub=
if [ "${PINMEM_CUDA:-0}" = 1 ] && [ "$clients" = 0 ]; then
	stub=$work/o/unit/libcudart_stub.so
	make -s -C src O="$work/o" CUDA=1 CUDA_HOME="$CUDA_HOME" PYTHON="$python" "$stub" >stub.log 2>&1 ||
		{ cat stub.log >&2; fail "building the CUDA stand-in failed"; }
fi

if [ "$clients" = 1 ]; then
	tests=$work/src/tests/platform/clients
	what=clients
else
	tests=$work/src/tests/python
	what=platform
fi
rc=0
(cd "$tests" && PINMEM_CUDA_STUB=$stub PYTHONDONTWRITEBYTECODE=1 \
	"$work/venv/bin/python" -m pytest -p no:cacheprovider -rfEs --durations=20 \
	--junitxml="$work/junit.xml" .) >pytest.log 2>&1 || rc=$?
must=
[ "$clients" = 1 ] || must=$work/src/tests/platform/must-run.txt
# The log's path as the host sees it (run.sh passes it; WORK is /build in a chroot).
line=$("$work/venv/bin/python" "$work/src/tests/platform/summary.py" --what "$what" \
	--distro "$distro" --pytest-rc "$rc" --log "${PINMEM_PLATFORM_LOG:-$work/pytest.log}" \
	${must:+--must-run "$must"} "$work/junit.xml") || rc=1
echo "$line"
[ "$clients" = 1 ] && exit "$rc"

# torch's own DataLoader suite of this platform's torch release, with its loader and
# pinmem's (tests/python/torch_suite), where that release's test file is vendored.
suite=$work/src/tests/python/torch_suite
tv=$("$work/venv/bin/python" -c 'import torch; print(".".join(torch.__version__.split(".")[:2]))') ||
	tv=unknown
if [ -f "$suite/$tv/test_dataloader.py" ]; then
	# the options given for tests/python are not torch's suite's
	(cd src && env -u PYTEST_ADDOPTS ../venv/bin/python tests/python/torch_suite/run.py \
		--out "$work/torch-suite") >torch-suite.log 2>&1 || { rc=1; tail -n 30 torch-suite.log >&2; }
	grep '^torch-suite: ' torch-suite.log | tail -n 1
else
	echo "torch-suite: $distro torch $tv: not run, its test_dataloader.py is not vendored" \
		"(tests/python/torch_suite/README.md)"
fi
exit "$rc"
