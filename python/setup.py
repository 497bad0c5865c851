# SPDX-License-Identifier: MIT
# The one build definition of the pinmem Python package (metadata in
# pyproject.toml).  Everything builds through it:
#
#   pip install --no-build-isolation --no-index ./python   (into a venv)
#   pip wheel --no-build-isolation --no-index --no-deps -w dist ./python
#   make python          setup.py build into $(O)/python (mk/80-python.mk),
#                        which the Debian package's python3-pinmem installs
#
# The extension _pinmem is python/src/*.c plus libpinmem itself: every
# lib/*.c and lib/stream/*.c (lib/backend_cuda.c only with CUDA), compiled
# here with the Makefile's flags, so a build needs neither `make` nor a
# prebuilt libpinmem.a.  `make python-pip-check` (mk/81-python-pip.mk) checks
# that this list is the Makefile's LIB_SRCS.
#
# Where the C sources come from: pip >= 21.3 (Debian 12 has 23.0) builds a
# local directory in place, so they are ../lib and ../include of this
# checkout; the build's scratch files go to ../build/python-pip, which git
# ignores, never into python/.  An sdist (setup.py sdist) carries copies of
# them in vendor/ and builds anywhere.
#
# Environment:
#   PINMEM_CUDA=0|1   leave out / require the cuda copy backend; by default
#                     it is built when $CUDA_HOME/include/cuda_runtime_api.h
#                     exists (CUDA_HOME default /usr/local/cuda), as `make`
#                     does.  It needs only the toolkit's headers: the
#                     runtime is dlopen'ed, never linked.
#   PINMEM_URING=auto|static|shared  liburing.a linked in when the compiler
#                     finds it (auto), else -luring.
#   PINMEM_WERROR=1   warnings are errors (make python sets it; a pip build
#                     on an unknown compiler does not).
#   PINMEM_BUILD_JOBS=N  parallel compiles (default: the CPUs).
#   CFLAGS, LDFLAGS   added to the compile and link lines, as distutils does.
import concurrent.futures
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

from setuptools import Command, Extension, setup
from setuptools.command.build_ext import build_ext as _build_ext
from setuptools.command.sdist import sdist as _sdist

here = os.path.dirname(os.path.abspath(__file__))
VENDOR = "vendor"


def find_root():
    """The directory holding lib/, include/ and VERSION."""
    for root in (os.path.join(here, VENDOR), os.path.dirname(here)):
        if all(os.path.exists(os.path.join(root, p))
               for p in ("VERSION", "include/pinmem.h", "lib/ctx.c")):
            return root
    sys.exit("pinmem: libpinmem's sources are not here: build from the pinmem "
             "checkout (pip install ./python builds in place) or from an sdist "
             "made by setup.py sdist; looked in %s and %s"
             % (os.path.join(here, VENDOR), os.path.dirname(here)))


root = find_root()
in_checkout = root == os.path.dirname(here)
with open(os.path.join(root, "VERSION")) as f:
    version = f.read().strip()


def cuda_config():
    cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    want = os.environ.get("PINMEM_CUDA", "")
    have = os.path.exists(os.path.join(cuda_home, "include", "cuda_runtime_api.h"))
    if want == "1" and not have:
        sys.exit("pinmem: PINMEM_CUDA=1 but %s/include/cuda_runtime_api.h is missing"
                 % cuda_home)
    return cuda_home, (have if want == "" else want == "1")


CUDA_HOME, CUDA = cuda_config()


def lib_sources():
    """libpinmem's sources, relative to root: what mk/10-lib.mk and
    mk/05-stream.mk put in LIB_SRCS."""
    srcs = glob.glob("lib/*.c", root_dir=root) + glob.glob("lib/stream/*.c", root_dir=root)
    if not CUDA:
        srcs.remove("lib/backend_cuda.c")
    return sorted(srcs)


def lib_headers():
    return sorted(glob.glob(os.path.join(root, "lib", "**", "*.h"), recursive=True) +
                  glob.glob(os.path.join(root, "include", "**", "*.h"), recursive=True))


WERROR = ["-Werror"] if os.environ.get("PINMEM_WERROR") == "1" else []
# The Makefile's PM_CFLAGS and LIB_CFLAGS (-fPIC comes with the
# interpreter's flags; -UNDEBUG undoes its -DNDEBUG, as make has none).
LIB_CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes",
              "-Wmissing-prototypes", "-Wno-unused-parameter", "-fvisibility=hidden",
              "-UNDEBUG", "-D_GNU_SOURCE", '-DPINMEM_VERSION="%s"' % version] + WERROR + [
              "-I" + os.path.join(root, d) for d in ("include", "lib", "lib/stream")]
if CUDA:
    LIB_CFLAGS += ["-DPM_HAVE_CUDA=1", "-isystem", os.path.join(CUDA_HOME, "include"),
                   '-DPM_CUDA_LIBDIR="%s"' % os.path.join(CUDA_HOME, "lib64")]
EXT_CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Wshadow", "-Wno-unused-parameter",
              "-Wno-missing-field-initializers", "-Wno-cast-function-type",
              "-fvisibility=hidden"] + WERROR


def newer(deps, target):
    """Whether target is missing or older than any of deps, to the
    nanosecond (distutils' newer_group compares whole seconds, and misses an
    edit made in the second of the last build)."""
    try:
        t = os.stat(target).st_mtime_ns
    except FileNotFoundError:
        return True
    for d in deps:
        try:
            if os.stat(d).st_mtime_ns > t:
                return True
        except FileNotFoundError:
            return True
    return False


def jobs():
    return max(1, int(os.environ.get("PINMEM_BUILD_JOBS") or os.cpu_count() or 1))


def run_parallel(fn, items):
    with concurrent.futures.ThreadPoolExecutor(jobs()) as pool:
        return list(pool.map(fn, items))


def liburing_link(cc):
    """([objects], [libraries]) that link liburing: its static archive when
    the compiler finds one (PINMEM_URING=auto|static), else -luring."""
    mode = os.environ.get("PINMEM_URING", "auto")
    if mode not in ("auto", "static", "shared"):
        sys.exit("pinmem: PINMEM_URING=%s: auto, static or shared" % mode)
    if mode != "shared":
        try:
            path = subprocess.run(cc + ["-print-file-name=liburing.a"], check=True,
                                  capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            path = ""
        if os.path.isabs(path) and os.path.exists(path):
            return [path], []
        if mode == "static":
            sys.exit("pinmem: PINMEM_URING=static but %s finds no liburing.a" % cc[0])
    return [], ["uring"]


class build_ext(_build_ext):
    """Compiles libpinmem's sources (with their own flags) and links them,
    and liburing, into the extension; compiles in parallel."""

    def build_extension(self, ext):
        lib = getattr(ext, "pm_lib_sources", None)
        if lib is None:
            return super().build_extension(ext)
        cc = self.compiler.compiler_so
        uring_objs, uring_libs = liburing_link(cc[:1])
        ext.extra_objects = [o for o in ext.extra_objects if o not in uring_objs]
        ext.libraries = [x for x in ext.libraries if x != "uring"] + uring_libs
        # The extension exports PyInit__pinmem only: libpinmem's pm_ calls
        # bind inside it (a libpinmem.so loaded globally by someone else
        # cannot interpose), and liburing.a's symbols stay hidden.
        tmp = os.path.join(self.build_temp, "pinmem")
        os.makedirs(tmp, exist_ok=True)
        vscript = os.path.join(tmp, "exports.map")
        with open(vscript, "w") as f:
            f.write("{ global: PyInit_%s; local: *; };\n" % ext.name.rsplit(".", 1)[-1])
        for arg in ["-Wl,--version-script=" + vscript] + (
                ["-Wl,--exclude-libs,ALL"] if uring_objs else []):
            if arg not in ext.extra_link_args:
                ext.extra_link_args.append(arg)

        # Everything is rebuilt when the compiler, flags, link or this
        # file change.
        with open(os.path.abspath(__file__), "rb") as f:
            me = hashlib.sha256(f.read()).hexdigest()
        key = json.dumps([me, cc, self.compiler.linker_so, LIB_CFLAGS, EXT_CFLAGS, root, lib,
                          uring_objs, uring_libs, ext.extra_link_args])
        key = hashlib.sha256(key.encode()).hexdigest()
        stamp = os.path.join(tmp, "flags")
        try:
            with open(stamp) as f:
                force = self.force or f.read() != key
        except OSError:
            force = True
        if force and os.path.exists(stamp):
            os.unlink(stamp)

        hdrs = lib_headers()

        def compile_one(rel):
            src = os.path.join(root, rel)
            obj = os.path.join(tmp, os.path.splitext(rel)[0] + ".o")
            if force or newer([src] + hdrs, obj):
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                self.compiler.spawn(cc + ["-c", src, "-o", obj] + LIB_CFLAGS)
            return obj

        objs = run_parallel(compile_one, lib)
        ext.extra_objects = objs + uring_objs + ext.extra_objects
        ext.depends = list(ext.depends) + [os.path.join(root, s) for s in lib] + hdrs

        # The extension's own sources, in parallel too.
        compile_all = self.compiler.compile

        def compile_parallel(sources, *args, **kw):
            return sum(run_parallel(lambda s: compile_all([s], *args, **kw), sources), [])

        saved_force = self.force
        self.force = force or newer(ext.sources + ext.depends + objs + uring_objs,
                                    self.get_ext_fullpath(ext.name))
        self.compiler.compile = compile_parallel
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_all
            self.force = saved_force
        with open(stamp, "w") as f:
            f.write(key)


class lib_sources_cmd(Command):
    """setup.py lib_sources: print libpinmem's sources this build compiles
    (relative to the checkout), one a line; make python-pip-check compares
    them with the Makefile's."""
    description = "print the libpinmem sources compiled into the extension"
    user_options = []

    def initialize_options(self):
        pass

    def finalize_options(self):
        pass

    def run(self):
        print("\n".join(lib_sources()))


class sdist(_sdist):
    """An sdist carries libpinmem's sources (lib/, include/, VERSION) in
    vendor/, so it builds away from the checkout."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        dst = os.path.join(base_dir, VENDOR)
        if os.path.exists(dst):
            shutil.rmtree(dst)
        os.makedirs(dst)
        for d in ("lib", "include"):
            shutil.copytree(os.path.join(root, d), os.path.join(dst, d),
                            ignore=shutil.ignore_patterns("*.o", "*.d", "__pycache__"))
        shutil.copy2(os.path.join(root, "VERSION"), dst)


ext = Extension(
    "pinmem._pinmem",
    sources=sorted(glob.glob("src/*.c", root_dir=here)),
    depends=sorted(glob.glob("src/*.h", root_dir=here)),
    include_dirs=[os.path.join(root, "include")],
    extra_compile_args=EXT_CFLAGS,
    libraries=["uring", "dl", "pthread"],
)
ext.pm_lib_sources = lib_sources()

options = {}
if in_checkout and not any(a.startswith(("--build-base", "-b")) for a in sys.argv):
    # Scratch files of a pip build go under the checkout's (git-ignored)
    # build/, not into python/; make python names its own --build-base.
    scratch = os.path.join(root, "build", "python-pip")
    os.makedirs(scratch, exist_ok=True)
    options = {"build": {"build_base": scratch}, "egg_info": {"egg_base": scratch}}

setup(
    version=version,
    packages=["pinmem"],
    # No package data: and build_py runs no egg_info into python/.
    include_package_data=False,
    ext_modules=[ext],
    cmdclass={"build_ext": build_ext, "sdist": sdist, "lib_sources": lib_sources_cmd},
    options=options,
)
