# SPDX-License-Identifier: MIT
"""Under torchrun --nproc_per_node=2 (gloo): pinmem.Stream and
pinmem.torch.DataLoader + DistributedSampler shard by rank
(tests/platform/clients/test_torchrun.py reads what each rank saw)."""
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

import pinmem
import pinmem.torch as pt
from jobutil import Ids, ids_of, write_result


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {"rank": rank, "world": world, "local_rank": int(os.environ["LOCAL_RANK"])}

    # DataLoader + DistributedSampler, two epochs (set_epoch reshuffles), pinmem's
    # loader and torch's over the same sampler arguments.
    n = int(sys.argv[1])
    for name, cls in (("torch", torch.utils.data.DataLoader), ("pinmem", pt.DataLoader)):
        epochs = []
        for epoch in range(2):
            sampler = DistributedSampler(Ids(n), shuffle=True, seed=11)
            sampler.set_epoch(epoch)
            lo = cls(Ids(n), batch_size=5, sampler=sampler, num_workers=2)
            epochs.append([ids_of(b) for b in lo])
            if name == "pinmem":
                out["pin_mode"] = lo.pin_mode
        out[name] = epochs
        out[name + "_class"] = type(lo).__module__ + "." + type(lo).__name__

    # pinmem.Stream over files of different sizes (rank and world size from
    # torch.distributed): rank 0 writes them, every rank reads its shard.
    data = os.path.join(os.environ["OUT"], "data")
    files = [os.path.join(data, "f%02d" % i) for i in range(int(sys.argv[2]))]
    if rank == 0:
        os.makedirs(data)
        for i, f in enumerate(files):
            with open(f, "wb") as fh:
                fh.write(i.to_bytes(4, "little") * (1000 + 997 * (i % 7)))
    dist.barrier()
    s = pinmem.Stream(files, batch_bytes=65536, shuffle=True, seed=3, epochs=2)
    batches = []
    for b in s:
        with b:
            got = []
            for it, v in zip(b.items, b.views):
                with open(files[it[0]], "rb") as fh:
                    assert bytes(memoryview(v)) == fh.read(), it
                got.append(it[0])
            batches.append([b.epoch, got])
    out["stream"] = batches
    write_result(out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":     # Python 3.14 starts workers with forkserver: a guard is needed
    main()
