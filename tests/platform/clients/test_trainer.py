# SPDX-License-Identifier: MIT
"""The HF Trainer with a pinmem.torch.DataLoader (get_train_dataloader overridden)
trains a tiny model to the same losses as with torch's loader under the same seed."""
import sys

from conftest import HERE, run_job


def test_trainer_with_a_pinmem_loader_reaches_torchs_loss(tmp_path):
    import os
    r = {}
    for kind in ("torch", "pinmem"):
        (tmp_path / kind).mkdir()
        r[kind] = run_job(tmp_path / kind, [sys.executable, os.path.join(HERE, "trainer_job.py"), kind])[0]
    assert r["pinmem"]["loaders"] == ["pinmem.torch.DataLoader"]
    assert r["torch"]["loaders"] == ["torch.utils.data.dataloader.DataLoader"]
    for kind in r:
        assert r[kind]["steps"] == 20 and len(r[kind]["losses"]) == 20, r[kind]
    # the same batches in the same order: the same losses, step for step
    assert r["pinmem"]["losses"] == r["torch"]["losses"]
    assert r["pinmem"]["train_loss"] == r["torch"]["train_loss"]
    losses = r["pinmem"]["losses"]
    assert sum(losses[-5:]) < sum(losses[:5])        # it trained
