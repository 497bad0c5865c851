# SPDX-License-Identifier: MIT
"""The README's Python examples run as written (from the top of the tree)."""
import os
import re
import subprocess
import sys

import pytest

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")


def blocks():
    if not os.path.exists(README):
        return []
    with open(README) as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)


@pytest.mark.skipif(not blocks(), reason="no README.md next to the tests (the VM copy)")
@pytest.mark.parametrize("i", range(len(blocks()) or 1))
def test_readme_python_block_runs(i):
    code = blocks()[i]
    if "import torch" in code:
        pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(README), env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_readme_has_the_training_loop():
    if not blocks():
        pytest.skip("no README.md next to the tests (the VM copy)")
    assert any("pinmem.torch.DataLoader" in b for b in blocks())
