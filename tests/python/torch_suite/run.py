# SPDX-License-Identifier: MIT
"""torch's own DataLoader suite, run with torch's loader and with pinmem's, compared.

    python3 tests/python/torch_suite/run.py [--out DIR] [--loader torch|pinmem] [-k EXPR]

(`make python-check` and `make platform-check` run it on each platform's pip
install of pinmem, tests/platform/suite.sh.)  The
vendored test_dataloader.py of the installed torch's release (the folder
named by torch.__version__'s major.minor) runs twice under pytest, at the
same time: once as it is, once with pinmem.torch.DataLoader in place of
torch.utils.data.DataLoader (hook/sitecustomize.py, in every process the
suite starts).  Every test that passes with torch's loader must pass with
pinmem's, except those listed in that folder's differences.txt, each with
its reason; a listed test that passes with both is an error too, so the
list stays true.  Tests that fail with torch's own loader here are shown
and not compared (they test nothing of pinmem's).

differences.txt: one test a line, `differs <Class>::<test> <reason>` for a
test that cannot pass with pinmem's loader, `skip <Class>::<test> <reason>`
for one run by neither (its time); `#` starts a comment.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOADERS = ("torch", "pinmem")
# A run that takes longer has hung: both runs together take ~9.5 CPU minutes (12 minutes
# on a busy 2-core machine).
RUN_LIMIT_S = int(os.environ.get("PINMEM_TORCH_SUITE_LIMIT", "2700"))


def suite_dir(version):
    m = re.match(r"(\d+)\.(\d+)", version)
    d = os.path.join(HERE, "%s.%s" % m.groups()) if m else None
    if d is None or not os.path.exists(os.path.join(d, "test_dataloader.py")):
        have = sorted(n for n in os.listdir(HERE) if re.fullmatch(r"\d+\.\d+", n))
        sys.exit("torch-suite: no test_dataloader.py for torch %s here (vendored: %s); add "
                 "the one of that release as %s/X.Y/test_dataloader.py (see README.md)"
                 % (version, ", ".join(have) or "none", os.path.relpath(HERE)))
    return d


def read_list(path):
    """{test id: (kind, reason)} from differences.txt."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) == 3 and parts[0] == "compared" and parts[1].isdigit():
                out["compared"] = ("compared", int(parts[1]))
                continue
            if len(parts) < 3 or parts[0] not in ("differs", "skip") or "::" not in parts[1]:
                sys.exit("torch-suite: %s:%d: want `differs|skip <Class>::<test> <reason>` "
                         "or `compared <N> <reason>`" % (path, n))
            if parts[1] in out:
                sys.exit("torch-suite: %s:%d: %s listed twice" % (path, n, parts[1]))
            out[parts[1]] = (parts[0], parts[2])
    return out


def start(loader, suite, listed, out, extra):
    wd = os.path.join(out, loader)
    os.makedirs(wd, exist_ok=True)
    outcomes = os.path.join(wd, "outcomes.jsonl")
    if os.path.exists(outcomes):
        os.unlink(outcomes)
    path = [HERE]
    if loader == "pinmem":
        path.insert(0, os.path.join(HERE, "hook"))
    try:
        import expecttest  # noqa: F401
    except ImportError:
        # torch's common_utils imports it for its TestCase base; no Debian package has it.
        path.append(os.path.join(HERE, "compat"))
    env = dict(os.environ, PINMEM_TORCH_SUITE_LOADER=loader, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join(path + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    test_file = os.path.join(suite, "test_dataloader.py")
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "suite_plugin",
           "-p", "no:hypothesispytest", "--rootdir", suite, "--confcutdir", suite,
           "-o", "faulthandler_timeout=240", "--suite-outcomes", outcomes]
    cmd += ["--suite-skip=" + tid for tid, (kind, _) in listed.items() if kind == "skip"]
    cmd += extra + [test_file]
    log = open(os.path.join(wd, "pytest.log"), "w")
    proc = subprocess.Popen(cmd, cwd=wd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, outcomes, log.name


def read_outcomes(path):
    collected, left_out, results, started = None, [], {}, None
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                if rec["event"] == "collected":
                    collected, left_out = rec["ids"], rec["left_out"]
                elif rec["event"] == "start":
                    started = rec["id"]
                elif rec["event"] == "outcome":
                    results[rec["id"]] = rec
                    started = None
    if started is not None:
        results[started] = {"outcome": "hung", "detail": "still running at the time limit",
                            "seconds": RUN_LIMIT_S}
    return collected, left_out, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--loader", choices=LOADERS, action="append",
                    help="run with this loader only (no comparison)")
    ap.add_argument("-k", default=None, help="pytest -k expression (no list check)")
    args = ap.parse_args()

    try:
        import torch
    except ImportError as e:
        sys.exit("torch-suite: torch is not importable (%s); it is what the suite tests" % e)
    suite = suite_dir(torch.__version__)
    listed = read_list(os.path.join(suite, "differences.txt"))
    out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="torch-suite-"))
    loaders = args.loader or LOADERS
    extra = ["-k", args.k] if args.k else []

    t0 = time.monotonic()
    runs = {ld: start(ld, suite, listed, out, extra) for ld in loaders}

    def stop(signum, _frame):
        # Each run is a session of its own (its workers with it): a timeout or ^C that
        # stops this process takes them along.
        for proc, _, _ in runs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit("torch-suite: stopped by signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rc = {}
    for ld, (proc, _, _) in runs.items():
        try:
            rc[ld] = proc.wait(timeout=max(1, RUN_LIMIT_S - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            rc[ld] = "killed at the %d s limit (PINMEM_TORCH_SUITE_LIMIT)" % RUN_LIMIT_S
    res = {}
    for ld, (_, outcomes, log) in runs.items():
        collected, left_out, results = read_outcomes(outcomes)
        if collected is None:
            sys.stdout.write(open(log).read()[-4000:])
            sys.exit("torch-suite: the run with %s's loader collected nothing (exit %s; log %s)"
                     % (ld, rc[ld], log))
        res[ld] = (collected, left_out, results)
    secs = time.monotonic() - t0
    if len(loaders) == 1:
        ids, _, results = res[loaders[0]]
        n = {o: sum(1 for r in results.values() if r["outcome"] == o)
             for o in ("passed", "failed", "skipped", "hung")}
        for tid, r in results.items():
            if r["outcome"] in ("failed", "hung"):
                print("  %s: %s" % (tid, r["detail"]))
        print("torch-suite: torch %s, %s's loader: %d tests, %d passed, %d failed, %d skipped%s "
              "(%.0f s)" % (torch.__version__, loaders[0], len(ids), n["passed"],
                            n["failed"] + n["hung"], n["skipped"],
                            ", %d hung" % n["hung"] if n["hung"] else "", secs))
        return 0 if rc[loaders[0]] == 0 else 1
    return compare(torch.__version__, suite, listed, res, rc, secs, check_list=not args.k)


def compare(version, suite, listed, res, rc, secs, check_list):
    t_ids, t_left_out, t_res = res["torch"]
    p_ids, _, p_res = res["pinmem"]
    problems, documented, torch_failed = [], [], []
    for ld in LOADERS:
        # pytest: 0 all passed, 1 some failed; anything else is a run that did not finish.
        if rc[ld] not in (0, 1):
            problems.append("the run with %s's loader did not finish: %s" % (ld, rc[ld]))
    if set(t_ids) != set(p_ids):
        problems.append("the runs collected different tests: %s"
                        % sorted(set(t_ids) ^ set(p_ids)))
    if check_list:
        known = set(t_ids) | set(t_left_out) | {"compared"}
        for tid in sorted(set(listed) - known):
            problems.append("%s is listed in differences.txt but the suite has no such test" % tid)
    t_passed = p_passed = 0
    unfinished = []
    for tid in t_ids:
        t = t_res.get(tid, {"outcome": "not run", "detail": ""})
        p = p_res.get(tid, {"outcome": "not run", "detail": ""})
        t_passed += t["outcome"] == "passed"
        p_passed += p["outcome"] == "passed"
        kind = listed.get(tid, (None,))[0]
        late = ["%s with %s's loader" % (o["outcome"], ld) for ld, o in (("torch", t), ("pinmem", p))
                if o["outcome"] in ("hung", "not run")]
        if late:
            unfinished.append("%s (%s)" % (tid, ", ".join(late)))
            continue
        if t["outcome"] == "failed":
            torch_failed.append("%s (torch's loader: %s)" % (tid, t["detail"]))
        if t["outcome"] != "passed":
            continue
        if p["outcome"] == "passed":
            if kind == "differs":
                problems.append("%s passes with pinmem's loader now: take it off differences.txt"
                                % tid)
        elif kind == "differs":
            documented.append(tid)
        else:
            problems.append("%s %s with pinmem's loader: %s"
                            % (tid, p["outcome"], p["detail"] or "(no detail)"))
    # A comparison of almost nothing passes vacuously: torch's own run broken (its
    # test helpers, a stand-in module) or most of it failing on a starved machine.
    floor = listed.get("compared", (None, 1))[1] if check_list else 1
    if t_passed < floor:
        problems.append("only %d tests passed with torch's own loader, fewer than the %d "
                        "differences.txt says are compared here: too little was compared"
                        % (t_passed, floor))
    if unfinished:
        problems.append("%d tests did not finish: %s" % (
            len(unfinished), "; ".join(unfinished[:3]) + (", ..." if len(unfinished) > 3 else "")))
    for line in torch_failed:
        print("torch-suite: not compared, fails with torch's own loader here: %s" % line)
    for line in problems:
        print("torch-suite: FAIL %s" % line)
    skipped = len(t_left_out)
    print("torch-suite: torch %s (suite %s): %d tests, torch's loader %d passed; pinmem's loader "
          "%d passed, %d documented differences, %d failed%s (%.0f s)"
          % (version, os.path.basename(suite), len(t_ids), t_passed, p_passed, len(documented),
             len(problems), ", %d skipped for time" % skipped if skipped else "", secs))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
