# SPDX-License-Identifier: MIT
"""Datasets of the tests' child scripts (python -c ...), in a module of their own.

A worker started by spawn or forkserver (Python 3.14's default start method on Linux)
gets the dataset pickled, which names its class by module; a class defined in a `-c`
script lives in a __main__ that such a worker cannot import.
"""
import time

import torch
from torch.utils.data import Dataset


class Ramp(Dataset):
    """100 samples of 1000 floats, each its index."""

    def __len__(self):
        return 100

    def __getitem__(self, i):
        return torch.zeros(1000) + i


class SlowZeros(Dataset):
    """1000 zero samples, 50 ms each: a loop still running when it is interrupted."""

    def __len__(self):
        return 1000

    def __getitem__(self, i):
        time.sleep(0.05)
        return torch.zeros(1000, dtype=torch.uint8)


class Big(Dataset):
    """3x224x224 float32 samples, 0.6 MiB each: a batch of 8 is 4.6 MiB."""

    def __len__(self):
        return 24

    def __getitem__(self, i):
        return torch.full((3, 224, 224), float(i)), i


class Small(Big):
    def __getitem__(self, i):
        return torch.full((64, 64), float(i)), i
