# SPDX-License-Identifier: MIT
"""Which GPU a rank's context defaults to."""
import os
import sys


def default_cuda_device():
    """torch's current device once CUDA is initialised there and set (not 0);
    else $LOCAL_RANK when the process sees more than one GPU (torchrun's rank
    to GPU mapping, for a rank that has not called torch.cuda.set_device yet);
    else -1: the calling thread's current device, which the library asks the
    runtime for (0 unless cudaSetDevice was called; the one GPU of a process
    that sees one)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        current = torch.cuda.current_device()
        if current:
            return current
    rank = os.environ.get("LOCAL_RANK", "")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    one_visible = visible is not None and visible != "" and "," not in visible
    if rank.isdigit() and not one_visible:
        return int(rank)
    return -1
