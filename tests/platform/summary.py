# SPDX-License-Identifier: MIT
"""The one line a platform of the Python matrix prints (tests/platform/suite.sh):

    platform: <distro> python X.Y torch A.B: N passed, M failed, K skipped

from pytest's JUnit report, run with the venv's interpreter (so X.Y and A.B
are what the tests ran with).  It fails (exit 1, saying why on stderr) when
pytest failed or found nothing, when a test failed or errored, when pinmem
was not imported from the venv, and when a test the must-run list names was
skipped or is missing: the cases that depend on torch's version (DataLoader
arguments, worker internals, DLPack stream rules) must run on every
platform, not be skipped there.
"""
import argparse
import fnmatch
import os
import sys
import xml.etree.ElementTree as ET

import pinmem
import torch


def results(junit):
    """{"file.py::name": "passed" | "failed" | "skipped"} from a JUnit report."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")   # test_x[.TestClass]
        name = "::".join([parts[0] + ".py"] + parts[1:] + [case.get("name")])
        if case.find("failure") is not None or case.find("error") is not None:
            state = "failed"
        elif case.find("skipped") is not None:
            state = "skipped"
        else:
            state = "passed"
        # a test that passed and then errored in teardown counts as failed
        if out.get(name) != "failed":
            out[name] = state
    return out


def must_run(path, cuda):
    """The patterns (fnmatch, file.py::test) of the must-run list that apply here."""
    out = []
    with open(path) as f:
        for line in f:
            pat = line.split("#")[0].strip()
            if pat.startswith("cuda:"):
                pat = pat[5:].strip() if cuda else ""
            if pat:
                out.append(pat)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--what", default="platform")
    ap.add_argument("--distro", required=True)
    ap.add_argument("--pytest-rc", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--must-run")
    ap.add_argument("junit")
    a = ap.parse_args()

    problems = []
    got = results(a.junit) if os.path.exists(a.junit) else {}
    counts = {s: sum(1 for v in got.values() if v == s) for s in ("passed", "failed", "skipped")}
    if not got:
        problems.append("pytest ran no test (exit %d)" % a.pytest_rc)
    elif a.pytest_rc != 0 and not counts["failed"]:
        problems.append("pytest exited %d with no failed test (a collection error?)" % a.pytest_rc)
    if counts["failed"]:
        problems.append("failed: " + ", ".join(sorted(n for n, v in got.items() if v == "failed")))
    if not pinmem.__file__.startswith(sys.prefix + os.sep):
        problems.append("pinmem was imported from %s, not from the venv %s" % (pinmem.__file__, sys.prefix))
    cuda = os.environ.get("PINMEM_CUDA") == "1"
    for pat in must_run(a.must_run, cuda) if a.must_run else []:
        hits = [n for n in got if fnmatch.fnmatchcase(n, pat)]
        if not hits and got:
            problems.append("must-run %s: no such test" % pat)
        skipped = [n for n in hits if got[n] == "skipped"]
        if skipped:
            problems.append("must-run %s: skipped here: %s" % (pat, ", ".join(skipped)))

    extra = ""
    if a.what == "clients":
        import accelerate
        import transformers
        extra = " accelerate %s transformers %s" % (accelerate.__version__, transformers.__version__)
    print("%s: %s python %d.%d torch %s%s: %d passed, %d failed, %d skipped" % (
        a.what, a.distro, sys.version_info[0], sys.version_info[1],
        ".".join(torch.__version__.split("+")[0].split(".")[:2]), extra,
        counts["passed"], counts["failed"], counts["skipped"]))
    for p in problems:
        print("%s: %s: %s (log %s)" % (a.what, a.distro, p, a.log), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
