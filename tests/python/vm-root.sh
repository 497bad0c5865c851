#!/bin/sh
# SPDX-License-Identifier: MIT
# Build the tree mk/80-python.mk hands to the VM (VM_EXTRA_ROOT): python3,
# its standard library (without tests, GUI and tooling), numpy and pytest,
# every shared library they load, the built pinmem package in /pinmem-py/lib
# and tests/python in /pinmem-py/tests.  torch is left out: with its
# dependencies it is larger than the rest of the VM many times over, so the
# loader tests skip there (pytest reports them) and the VM runs the
# module-pinned buffer, memfd and stream tests.
# usage: vm-root.sh OUT PY_BUILD_DIR
set -eu
out=$1
pkg=$2
python=${PYTHON:-/usr/bin/python3}
py=$(readlink -f "$(command -v "$python")")
ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
dist=/usr/lib/python3/dist-packages
rm -rf "$out"
mkdir -p "$out/usr/bin" "$out/usr/lib/python$ver" "$out$dist" "$out/pinmem-py/tests" \
	"$out/pinmem-py/lib"
cp "$py" "$out/usr/bin/python3"
(cd "/usr/lib/python$ver" && tar cf - --exclude=./test --exclude=./idlelib --exclude=./tkinter \
	--exclude=./turtledemo --exclude=./ensurepip --exclude=./lib2to3 --exclude=./pydoc_data \
	--exclude='./config-*' --exclude=./unittest/test --exclude=./sitecustomize.py .) |
	(cd "$out/usr/lib/python$ver" && tar xf -)
# pytest's and numpy's own modules, found the way python finds them.
for m in $("$python" - <<'PY'
import importlib, os, sys
import numpy, pytest  # noqa: F401  (what the suite imports, and what they import)
import _pytest.python, _pytest.tmpdir, _pytest.monkeypatch, _pytest.skipping  # noqa: F401
roots = set()
for mod in list(sys.modules.values()):
    f = getattr(mod, "__file__", None) or ""
    if f.startswith("/usr/lib/python3/dist-packages/"):
        roots.add(f[len("/usr/lib/python3/dist-packages/"):].split("/")[0])
print("\n".join(sorted(roots)))
PY
); do
	cp -rL "$dist/$m" "$out$dist/"
done
# numpy's own test suites are a third of it.
find "$out$dist" -type d -name tests -prune -exec rm -rf {} +
cp -rL "$pkg/pinmem" "$out/pinmem-py/lib/"
cp tests/python/*.py "$out/pinmem-py/tests/"
# Every shared library any of it loads, at the same path.
find "$out" -name '*.so*' -type f | { echo "$py"; cat; } | xargs ldd 2>/dev/null |
	awk '/=> \// { print $3; next } /^[ \t]+\// { print $1 }' | sort -u |
	while read -r lib; do
		mkdir -p "$out$(dirname "$lib")"
		cp -L "$lib" "$out$lib"
	done
# The loader path of the interpreter itself.
for l in /lib64/ld-linux-x86-64.so.2; do
	mkdir -p "$out$(dirname "$l")"
	cp -L "$l" "$out$l"
done
du -sh "$out" | sed 's/^/vm-root: /'
