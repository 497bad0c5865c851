# SPDX-License-Identifier: MIT
"""torchrun (torch.distributed.run) for Debian's python3-torch, which is built
without libuv: torchrun's rendezvous and its ranks' env:// client create
their TCPStore with torch's default use_libuv=True whatever $USE_LIBUV says,
and fail ("use_libuv was requested but PyTorch was built without libuv
support").  patch() makes the store follow $USE_LIBUV, as torch's env://
server does; run as a program it is torchrun, patched.  The clients' jobs
call patch() too (jobutil.py), before init_process_group."""
import importlib
import os
import sys

import torch.distributed as dist

# the module, not torch.distributed's function of the same name
rdzv = importlib.import_module("torch.distributed.rendezvous")

_TCPStore = dist.TCPStore


def _store(*args, **kwargs):
    kwargs.setdefault("use_libuv", os.environ.get("USE_LIBUV", "1") == "1")
    return _TCPStore(*args, **kwargs)


def patch():
    for mod in (dist, rdzv):
        mod.TCPStore = _store


if __name__ == "__main__":
    patch()
    from torch.distributed.run import main
    sys.exit(main())
