# SPDX-License-Identifier: MIT
"""What the clients' job scripts share (they run under torchrun or accelerate
launch, one process a rank; tests/platform/clients/conftest.py reads back)."""
import json
import os

import torch
from torch.utils.data import Dataset

import torchrun_shim

torchrun_shim.patch()


class Ids(Dataset):
    """Sample i is (a float row that encodes i, i): which samples a rank saw,
    read back from the batches themselves."""

    def __init__(self, n, width=4):
        self.n, self.width = n, width

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((self.width,), float(i)), i


def ids_of(batch):
    """The sample ids of an Ids batch, checking the two fields agree."""
    x, y = batch
    assert torch.equal(x[:, 0].long(), y), (x, y)
    return [int(i) for i in y]


def write_result(result):
    """This rank's result, to $OUT/rank<N>.json."""
    with open(os.path.join(os.environ["OUT"], "rank%d.json" % result["rank"]), "w") as f:
        json.dump(result, f)
