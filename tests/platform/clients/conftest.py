# SPDX-License-Identifier: MIT
"""Runs the real clients' scripts (tests/platform/clients/*_job.py) as their
users run them, CPU only and offline (make clients-check runs this suite in
the unstable chroot, in a network namespace with only loopback).

Each job writes one JSON file per rank into a scratch directory; the tests
read them back and compare pinmem's loader with torch's, its oracle.
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# No downloads, no telemetry, one thread a process (2 ranks on a small machine);
# USE_LIBUV=0: Debian's torch is built without libuv, which torchrun's store
# wants by default ("use_libuv was requested but PyTorch was built without").
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
       "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
       "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", "USE_LIBUV": "0"}


def run_job(tmp_path, cmd, timeout=900):
    """Runs cmd (its job script gets OUT=tmp_path) and returns the ranks' results, by rank."""
    env = dict(os.environ, OUT=str(tmp_path), HF_HOME=str(tmp_path / "hf"), **ENV)
    p = subprocess.run(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout)
    assert p.returncode == 0, "%s exited %d:\n%s" % (" ".join(cmd), p.returncode, p.stdout[-6000:])
    out = {}
    for f in sorted(os.listdir(str(tmp_path))):
        if f.startswith("rank") and f.endswith(".json"):
            with open(str(tmp_path / f)) as fh:
                r = json.load(fh)
            out[r["rank"]] = r
    assert out, "%s wrote no result:\n%s" % (" ".join(cmd), p.stdout[-6000:])
    return out


def torchrun(nproc, job, *args):
    """torchrun --nproc_per_node=N job args on loopback (the chroot's network has no
    name for the host, which --standalone looks up), run by the venv's interpreter
    (so the ranks import the venv's pinmem) through torchrun_shim.py: Debian's torch
    has no libuv, which torchrun's store asks for whatever USE_LIBUV says."""
    return [sys.executable, os.path.join(HERE, "torchrun_shim.py"), "--nnodes=1",
            "--nproc_per_node=%d" % nproc, "--master_addr=127.0.0.1", "--master_port=29500",
            os.path.join(HERE, job)] + list(args)
