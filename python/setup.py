# SPDX-License-Identifier: MIT
# Build of the pinmem Python package, run by `make python` (mk/80-python.mk)
# offline, with Debian's python3-dev and python3-setuptools and no build
# isolation.  libpinmem is linked statically (PINMEM_LIBA), so the extension
# needs no rpath and works wherever the package is copied.
import glob
import os

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
liba = os.environ.get("PINMEM_LIBA", os.path.join(root, "build", "libpinmem.a"))
with open(os.path.join(root, "VERSION")) as f:
    version = f.read().strip()

ext = Extension(
    "pinmem._pinmem",
    sources=sorted(glob.glob(os.path.join("src", "*.c"))),
    depends=sorted(glob.glob(os.path.join("src", "*.h"))) + [
        os.path.join(root, "include", "uapi", "pinmem.h")],
    include_dirs=[os.path.join(root, "include")],
    extra_compile_args=["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wshadow",
                        "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type", "-fvisibility=hidden"],
    extra_objects=[liba],
    libraries=["uring", "dl", "pthread"],
)

setup(
    name="pinmem",
    version=version,
    description="Pinned, budgeted host memory and GPU data loading (libpinmem)",
    license="MIT",
    packages=["pinmem"],
    ext_modules=[ext],
)
