# SPDX-License-Identifier: MIT
"""Under torchrun --nproc_per_node=2 (Accelerate takes its ranks from the
launcher's environment, gloo on CPU): Accelerator().prepare(model,
optimizer, loader) with a pinmem.torch.DataLoader and with torch's, same
arguments; each rank records the samples its prepared loader gave it
(tests/platform/clients/test_accelerate.py compares them)."""
import sys

import torch
from accelerate import Accelerator
from torch.utils.data import DistributedSampler

import pinmem.torch as pt
from jobutil import Ids, ids_of, write_result


def train(acc, loader, epochs=2):
    """Two epochs of SGD on a linear model through accelerate; the sample ids each step saw."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt, prepared = acc.prepare(model, opt, loader)
    seen = []
    for _ in range(epochs):
        ep = []
        for b in prepared:
            ep.append(ids_of(b))
            loss = model(b[0]).pow(2).mean()
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
        seen.append(ep)
    base = getattr(prepared, "base_dataloader", prepared)
    return (seen, type(base).__module__ + "." + type(base).__name__,
            float(acc.unwrap_model(model).weight.sum()))


def main():
    n = int(sys.argv[1])
    # Accelerate picks MPI on CPU when torch has it (Debian's has): without mpirun
    # every process is then rank 0 of 1.  gloo first, which Accelerate adopts.
    torch.distributed.init_process_group("gloo")
    acc = Accelerator(cpu=True)
    out = {"rank": acc.process_index, "world": acc.num_processes,
           "distributed_type": str(acc.distributed_type)}

    for name, cls in (("torch", torch.utils.data.DataLoader), ("pinmem", pt.DataLoader)):
        lo = cls(Ids(n), batch_size=4, shuffle=True, num_workers=2,
                 generator=torch.Generator().manual_seed(7))
        out[name], out[name + "_prepared"], out[name + "_weight"] = train(acc, lo)

    # What keeps pinmem's ring under Accelerate: prepare the model and optimizer,
    # shard the pinmem loader with torch's DistributedSampler on accelerate's ranks.
    sampler = DistributedSampler(Ids(n), num_replicas=acc.num_processes, rank=acc.process_index,
                                 shuffle=True, seed=7)
    for name, cls in (("torch_ds", torch.utils.data.DataLoader), ("pinmem_ds", pt.DataLoader)):
        lo = cls(Ids(n), batch_size=4, sampler=sampler, num_workers=2)
        out[name] = [ids_of(b) for b in lo]
        out[name + "_class"] = type(lo).__module__ + "." + type(lo).__name__
    write_result(out)
    acc.wait_for_everyone()


if __name__ == "__main__":     # Python 3.14 starts workers with forkserver: a guard is needed
    main()
