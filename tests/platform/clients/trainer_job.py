# SPDX-License-Identifier: MIT
"""The HF Trainer trains a tiny GPT-2 (built from a config: nothing is
downloaded) for 20 steps on CPU, its train loader given by
get_train_dataloader: pinmem.torch.DataLoader, or torch's with the same
arguments (argv[1]: pinmem | torch).  Writes the per-step losses
(tests/platform/clients/test_trainer.py compares the two runs)."""
import sys

import torch
import transformers
from torch.utils.data import Dataset, RandomSampler
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

import pinmem.torch as pt
from jobutil import write_result

kind = sys.argv[1]
Loader = {"pinmem": pt.DataLoader, "torch": torch.utils.data.DataLoader}[kind]


class Tokens(Dataset):
    """Counting sequences from random starts (the same in every run): learnable,
    so the loss falls within 20 steps."""

    def __init__(self, n=160, seq=16, vocab=64):
        g = torch.Generator().manual_seed(1)
        self.x = (torch.randint(0, vocab, (n, 1), generator=g) + torch.arange(seq)) % vocab

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


class LoaderTrainer(Trainer):
    loaders = []

    def get_train_dataloader(self):
        lo = Loader(self.train_dataset, batch_size=self._train_batch_size,
                    sampler=RandomSampler(self.train_dataset,
                                          generator=torch.Generator().manual_seed(self.args.seed)),
                    collate_fn=self.data_collator, num_workers=self.args.dataloader_num_workers,
                    drop_last=self.args.dataloader_drop_last)
        self.loaders.append(lo)
        return lo


def main():
    transformers.set_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2,
                                       n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    args = TrainingArguments(output_dir="out-" + kind, max_steps=20, per_device_train_batch_size=8,
                             learning_rate=1e-2, logging_steps=1, save_strategy="no",
                             report_to=[], use_cpu=True, seed=0, dataloader_num_workers=2,
                             disable_tqdm=True)
    trainer = LoaderTrainer(model=model, args=args, train_dataset=Tokens())
    result = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    write_result({"rank": 0, "kind": kind, "losses": losses, "train_loss": result.training_loss,
                  "steps": trainer.state.global_step,
                  "loaders": [type(lo).__module__ + "." + type(lo).__name__ for lo in trainer.loaders]})


if __name__ == "__main__":     # Python 3.14 starts workers with forkserver: a guard is needed
    main()
