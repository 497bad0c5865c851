# SPDX-License-Identifier: MIT
"""pinmem: pinned, budgeted host memory for GPU data loading.

    import pinmem
    ctx = pinmem.open()                       # /dev/pinmem if usable, else mlock
    buf = ctx.empty((256, 3, 224, 224), "uint8")
    t = torch.from_dlpack(buf)                # zero-copy view of pinned memory

See Context, Buffer, Stream, and pinmem.torch for a DataLoader whose workers
write batches straight into pinned memory.
"""
from ._pinmem import (BudgetError, Buffer, Context, Error, Manifest,  # noqa: F401
                      crc32c, module_stats)
from ._device import default_cuda_device as _default_cuda_device
from .stream import Stream  # noqa: F401

__all__ = ["open", "Context", "Buffer", "Manifest", "Stream", "Error",
           "BudgetError", "crc32c", "module_stats"]


def open(*, module="auto", backend="auto", device=None, cuda_device=None,
         cuda_library=None):
    """Open a libpinmem context.

    module: "auto" (pin through /dev/pinmem when usable, else mlock),
    "require" (raise pinmem.Error without a usable module) or "off".
    backend: "auto" (cuda when built and a GPU exists, else host), "cuda",
    "host" or "none".  device: the pinmem device node (default /dev/pinmem).
    cuda_device: the GPU copies go to and buffers are registered with; by
    default this rank's: torch's current device once set, else $LOCAL_RANK
    when several GPUs are visible, else the calling thread's current one
    (-1, the runtime's).  ctx.info() says what was obtained; a refused pin
    raises pinmem.BudgetError carrying the library's sentence.
    """
    if cuda_device is None:
        cuda_device = _default_cuda_device()
    return Context(module=module, backend=backend, device=device,
                   cuda_device=cuda_device, cuda_library=cuda_library)
