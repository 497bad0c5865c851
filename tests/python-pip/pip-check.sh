#!/bin/sh
# SPDX-License-Identifier: MIT
# The Python package installed the way a user installs it: with pip, into
# venvs, offline, from a clean copy of this checkout (run by `make
# python-pip-check`, mk/81-python-pip.mk):
#   1. setup.py compiles the Makefile's libpinmem sources ($LIB_SRCS);
#   2. python3 -m venv --system-site-packages v
#      v/bin/pip install --no-build-isolation --no-index ./python
#      installs, imports pinmem and pinmem.torch, and leaves the source tree
#      as it was (scratch files only under the ignored build/);
#   3. pip wheel --no-build-isolation --no-index --no-deps -w dist ./python
#      builds a wheel (libpinmem and, when liburing.a is there, liburing
#      inside; numpy required, torch an extra) that installs into a second
#      fresh venv and passes a smoke test there: a host-mode context and
#      buffer, a Stream over small files, pinmem.torch.DataLoader with a
#      worker against torch's;
#   4. an sdist (setup.py sdist, libpinmem's sources in vendor/) builds a
#      wheel away from the checkout;
#   5. pip uninstall -y pinmem leaves both venvs file for file as they were.
# Everything happens in a temporary directory, removed at the end.
# Environment: PYTHON (default /usr/bin/python3), LIB_SRCS (the Makefile's
# list, for 1), PINMEM_CUDA/CUDA_HOME (passed to setup.py), KEEP=1 keeps the
# temporary directory.
set -eu

PYTHON=${PYTHON:-/usr/bin/python3}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/pinmem-pip.XXXXXX)
cleanup() { [ "${KEEP:-0}" = 1 ] && echo "pip-check: kept $tmp" || rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "pip-check: FAIL: $*" >&2; exit 1; }
t0=$(date +%s)
step() { echo "pip-check: [$(($(date +%s) - t0))s] $*"; }

# pip as a user without network runs it: no index, no configured links,
# no user or site config; bytecode as pip writes it.
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_REQUIRE_VIRTUALENV \
	PYTHONDONTWRITEBYTECODE PYTHONPATH 2>/dev/null || true
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
PIP_OFF="--no-build-isolation --no-index"

# What this needs from the system (Debian: python3-venv, python3-pip-whl,
# python3-setuptools, python3-wheel, python3-numpy).
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null ||
	fail "$PYTHON has no venv/ensurepip (Debian: apt-get install python3-venv)"
"$PYTHON" -c 'import setuptools, wheel, numpy' 2>/dev/null ||
	fail "$PYTHON lacks setuptools, wheel or numpy (Debian: python3-setuptools python3-wheel python3-numpy)"

# A clean checkout: tracked and not-ignored files (as make deb copies them).
mkdir "$tmp/src"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z -co --exclude-standard |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -C "$tmp/src" -xf -
else
	(cd "$src" && tar --exclude=./build --exclude=./.git -cf - .) | tar -C "$tmp/src" -xf -
fi
tree_list() { (cd "$tmp/src" && find . -path ./build -prune -o -print | LC_ALL=C sort); }
tree_list > "$tmp/tree.before"
step "copied the checkout to $tmp/src"

# 1. The same libpinmem sources as the Makefile's.
if [ -n "${LIB_SRCS:-}" ]; then
	got=$(cd "$tmp/src/python" && "$PYTHON" setup.py -q lib_sources | tr '\n' ' ')
	want=$(printf '%s\n' $LIB_SRCS | LC_ALL=C sort | tr '\n' ' ')
	[ "$got" = "$want" ] ||
		fail "setup.py compiles [$got], the Makefile's LIB_SRCS is [$want]"
	step "setup.py compiles the Makefile's $(echo $want | wc -w) libpinmem sources"
fi

venv_list() { (cd "$1" && find . -print | LC_ALL=C sort); }

# 2. pip install ./python into a venv.
cd "$tmp"
"$PYTHON" -m venv --system-site-packages v1
venv_list v1 > v1.before
s=$(date +%s)
(cd src && ../v1/bin/pip install -q $PIP_OFF ./python) || fail "pip install ./python"
v1/bin/python - <<'EOF' || fail "pinmem from pip install ./python"
import os, sys
import pinmem, pinmem.torch
assert pinmem.__file__.startswith(sys.prefix + os.sep), pinmem.__file__
print("pip-check: installed", pinmem.__file__)
EOF
step "pip install ./python into a venv: $(($(date +%s) - s))s"
tree_list > tree.after
diff -u tree.before tree.after >&2 ||
	fail "the build wrote into the source tree outside build/ (above)"

# 3. A wheel, installed into a second fresh venv, smoke-tested.
s=$(date +%s)
(cd src && ../v1/bin/pip wheel -q $PIP_OFF --no-deps -w ../dist ./python) || fail "pip wheel ./python"
whl=$(ls dist/pinmem-*.whl)
[ "$(echo "$whl" | wc -l)" = 1 ] || fail "pip wheel made: $whl"
step "pip wheel: $(basename "$whl"): $(($(date +%s) - s))s"
tree_list > tree.after
diff -u tree.before tree.after >&2 || fail "pip wheel wrote into the source tree outside build/"

"$PYTHON" -m venv --system-site-packages v2
venv_list v2 > v2.before
v2/bin/pip install -q --no-index "$whl" || fail "pip install $whl"
mkdir smoke && for i in 0 1 2 3 4; do head -c $((1000 + i * 777)) /dev/urandom > smoke/f$i; done
ext_ok=0
uring_a=$(cc -print-file-name=liburing.a 2>/dev/null || true)
case $uring_a in /*) [ -e "$uring_a" ] && ext_ok=1 ;; esac
s=$(date +%s)
URING_STATIC=$ext_ok v2/bin/python - smoke/f0 smoke/f1 smoke/f2 smoke/f3 smoke/f4 <<'EOF' || fail "smoke test of the wheel"
import importlib.metadata as md
import os
import subprocess
import sys

import numpy
import pinmem
import pinmem.torch
import torch

files = sys.argv[1:]
assert pinmem.__file__.startswith(sys.prefix + os.sep), pinmem.__file__

# The metadata: numpy required, torch an extra.
reqs = md.requires("pinmem")
assert "numpy" in reqs and any(r.startswith("torch") and "extra" in r for r in reqs), reqs

# The extension: libpinmem inside, liburing too when its archive is there,
# only PyInit__pinmem exported.
so = pinmem._pinmem.__file__
dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True, check=True).stdout
assert "libpinmem" not in dyn, dyn
if os.environ["URING_STATIC"] == "1":
    assert "liburing" not in dyn, "liburing.a is there but the extension needs liburing.so"
syms = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True,
                      check=True).stdout.split()
assert [s for s in syms if s.startswith(("pm_", "io_uring"))] == [], syms

# A context in host mode, a pinned buffer.
ctx = pinmem.open(backend="host")
info = ctx.info()
assert info["backend"] == "host", info
buf = ctx.empty((4, 1000), "uint8")
a = numpy.asarray(buf)
a[:] = 7
assert a.sum() == 4 * 1000 * 7

# A Stream over the files: every item's bytes.
want = [open(f, "rb").read() for f in files]
seen = []
with pinmem.Stream(files, batch_items=2, shuffle=True, seed=1, ctx=ctx) as s:
    for b in s:
        with b:
            for it, v in zip(b.items, b.views):
                assert bytes(memoryview(v)) == want[it[0]]
                seen.append(it[0])
assert sorted(seen) == list(range(len(files))), seen

# pinmem.torch.DataLoader with a worker yields torch's batches.
data = [torch.full((3,), i, dtype=torch.float32) for i in range(10)]
ours = [b.clone() for b in pinmem.torch.DataLoader(data, batch_size=4, num_workers=1, ctx=ctx)]
ref = list(torch.utils.data.DataLoader(data, batch_size=4))
assert len(ours) == len(ref) and all(torch.equal(x, y) for x, y in zip(ours, ref))
print("pip-check: smoke test passed: pinmem %s, torch %s, %s pin, %d stream items, %d loader batches"
      % (md.version("pinmem"), torch.__version__, info["module"] and "module" or "no-module",
         len(seen), len(ours)))
EOF
step "wheel installed into a fresh venv, smoke test: $(($(date +%s) - s))s"

# 4. An sdist builds a wheel away from the checkout.
s=$(date +%s)
(cd src/python && "$PYTHON" setup.py -q sdist -d "$tmp/sdist" >/dev/null 2>&1) || fail "setup.py sdist"
sd=$(ls sdist/pinmem-*.tar.gz)
tar -tzf "$sd" | grep -q '/vendor/lib/ctx.c$' || fail "$sd has no vendor/lib/ctx.c"
mkdir sdist-build && tar -C sdist-build -xzf "$sd"
(cd sdist-build/pinmem-* && "$tmp/v1/bin/pip" wheel -q $PIP_OFF --no-deps -w "$tmp/sdist-dist" .) ||
	fail "pip wheel from the sdist $sd"
ls sdist-dist/pinmem-*.whl >/dev/null || fail "no wheel from the sdist"
tree_list > tree.after
diff -u tree.before tree.after >&2 || fail "setup.py sdist wrote into the source tree outside build/"
step "sdist $(basename "$sd") builds a wheel on its own: $(($(date +%s) - s))s"

# 5. Uninstall leaves nothing.
for v in v1 v2; do
	$v/bin/pip uninstall -y -q pinmem || fail "pip uninstall in $v"
	venv_list $v > $v.after
	diff -u $v.before $v.after >&2 || fail "pip uninstall left files in $v (above)"
done
step "pip uninstall -y pinmem: both venvs as before the install"
echo "pip-check: passed in $(($(date +%s) - t0))s"
