#!/bin/sh
# SPDX-License-Identifier: MIT
# Run inside the test VM (tests/vm/init.sh runs /tests/extra/*) with
# pinmem.ko loaded: the pytest suite against the real /dev/pinmem, with the
# tree tests/python/vm-root.sh built.  PINMEM_TEST_MODULE=1 makes every
# context require the module and every pinned byte count go through VmPin
# and the module's stats.
cd /pinmem-py/tests || exit 1
export PINMEM_TEST_MODULE=1 HOME=/tmp PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=/pinmem-py/lib:/usr/lib/python3/dist-packages
exec /usr/bin/python3 -S -m pytest -q -rs --color=no -p no:cacheprovider .
