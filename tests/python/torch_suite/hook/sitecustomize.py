# SPDX-License-Identifier: MIT
"""Puts pinmem.torch.DataLoader where torch's suite finds torch's, in every process.

tests/python/torch_suite/run.py puts this folder first on PYTHONPATH for the
run with pinmem's loader (PINMEM_TORCH_SUITE_LOADER=pinmem).  Python imports
sitecustomize at start-up in the test process and in every process it starts:
the spawn and forkserver children that import test_dataloader again, and the
`python -c` programs some tests run.  Once `import torch` has finished (not
before: pinmem.torch needs a whole torch), torch.utils.data.DataLoader is
replaced by pinmem's, so `from torch.utils.data import DataLoader` and
`torch.utils.data.DataLoader(...)` both give pinmem's loader.  pinmem.torch
subclasses the class it found at its own import, torch's, and torch's code
uses torch.utils.data.dataloader.DataLoader, which stays torch's.

Debian's own sitecustomize (apport's crash hook) is shadowed in these runs.
"""
import importlib.abc
import importlib.machinery
import os
import sys


def _patch():
    import torch.utils.data
    import pinmem.torch
    torch.utils.data.DataLoader = pinmem.torch.DataLoader


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Runs _patch once the top-level torch module has been executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_patch(module):
            exec_module(module)
            _patch()
        spec.loader.exec_module = exec_then_patch
        return spec


if os.environ.get("PINMEM_TORCH_SUITE_LOADER") == "pinmem":
    if "torch" in sys.modules:
        _patch()
    else:
        sys.meta_path.insert(0, _AfterTorch())
