# SPDX-License-Identifier: MIT
"""pytest plugin for one run of torch's DataLoader suite (loaded by run.py with -p).

It checks that the suite's DataLoader is the loader asked for (torch's, or
pinmem's when PINMEM_TORCH_SUITE_LOADER=pinmem: see hook/sitecustomize.py),
so a run can never compare torch's loader with itself, and writes each
test's outcome as a JSON line to --suite-outcomes as the test ends (a line
when a test starts too: a run killed by its time limit still tells which
test hung).
"""
import json
import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--suite-outcomes", required=True,
                     help="file to append one JSON line per test event to")
    parser.addoption("--suite-skip", action="append", default=[],
                     help="<Class>::<test> to leave out (differences.txt's skip lines)")


def _test_id(nodeid):
    # "test_dataloader.py::TestDataLoader::test_x" -> "TestDataLoader::test_x"
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


class _Outcomes:
    def __init__(self, path):
        self.f = open(path, "a")
        self.state = {}
        self.left_out = []

    def write(self, **rec):
        self.f.write(json.dumps(rec) + "\n")
        self.f.flush()

    def pytest_collection_modifyitems(self, config, items):
        skip = set(config.getoption("--suite-skip"))
        left_out = [i for i in items if _test_id(i.nodeid) in skip]
        if left_out:
            items[:] = [i for i in items if _test_id(i.nodeid) not in skip]
            config.hook.pytest_deselected(items=left_out)
        self.left_out = [_test_id(i.nodeid) for i in left_out]

    def pytest_collection_finish(self, session):
        items = session.items           # after -k and --deselect
        import torch.utils.data
        want = os.environ.get("PINMEM_TORCH_SUITE_LOADER", "torch")
        if want == "pinmem":
            import pinmem.torch
            cls = pinmem.torch.DataLoader
        else:
            cls = torch.utils.data.dataloader.DataLoader
        mods = {item.module for item in items if getattr(item, "module", None) is not None}
        for mod in mods:
            got = getattr(mod, "DataLoader", None)
            if got is not cls or torch.utils.data.DataLoader is not cls:
                raise pytest.UsageError(
                    "torch-suite: %s's DataLoader is %r, torch.utils.data.DataLoader is %r; "
                    "this run is for %r" % (mod.__name__, got, torch.utils.data.DataLoader, cls))
        self.write(event="collected", ids=[_test_id(i.nodeid) for i in items],
                   left_out=self.left_out,
                   loader="%s.%s" % (cls.__module__, cls.__qualname__))

    def pytest_runtest_logstart(self, nodeid, location):
        self.write(event="start", id=_test_id(nodeid))

    def pytest_runtest_logreport(self, report):
        tid = _test_id(report.nodeid)
        st = self.state.setdefault(tid, {"outcome": "passed", "detail": "", "seconds": 0.0})
        st["seconds"] = round(st["seconds"] + report.duration, 3)
        if report.failed and st["outcome"] != "failed":
            st["outcome"] = "failed"
            st["detail"] = "%s: %s" % (report.when, _last_line(report))
        elif report.skipped and st["outcome"] == "passed":
            st["outcome"] = "skipped"
            st["detail"] = _last_line(report)

    def pytest_runtest_logfinish(self, nodeid, location):
        tid = _test_id(nodeid)
        st = self.state.pop(tid, None)
        if st is not None:
            self.write(event="outcome", id=tid, **st)


def _last_line(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    text = str(report.longrepr or "").strip()
    lines = [ln for ln in text.splitlines() if ln.startswith("E ")] or text.splitlines()[-1:]
    return " | ".join(ln[1:].strip() if ln.startswith("E ") else ln for ln in lines[:3])[:400]


def pytest_configure(config):
    config.pluginmanager.register(_Outcomes(config.getoption("--suite-outcomes")), "suite-outcomes")
