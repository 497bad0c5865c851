#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Each man page says what its program's --help says (`make man-check`).

For every man/NAME.N whose program is built in $O (pinctl, pinstream):

- options: every option in `NAME --help` (and, for a program with
  commands, in `NAME CMD --help` for each command the help lists) is
  documented in the man page, as a heading of the OPTIONS or COMMANDS
  section or in the SYNOPSIS; and every option the man page documents
  that way is one the help knows (none stale);
- the page renders without groff warnings (groff -man -ww);
- synopsis: every form of the help's usage lines ("usage: NAME ...",
  continued on indented lines) is a form of the man page's SYNOPSIS, word
  for word (blanks around [ ] | ignored); a synopsis form that starts like
  a usage form (the same program and first word) must equal one.  Usage
  lines of a generic shape (NAME COMMAND ...) are left out.

Usage: man-help.py [O]   (O: the build directory, default build)
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPT = re.compile(r"(?<![\w./=-])(--?[A-Za-z][A-Za-z0-9-]*)")
errors = 0


def fail(msg):
    global errors
    errors += 1
    print("man-check: FAIL: " + msg, flush=True)


def roff_args(s):
    """Split a macro's arguments as roff does: blanks, "quoted strings"."""
    out, i = [], 0
    while i < len(s):
        if s[i] in " \t":
            i += 1
        elif s[i] == '"':
            j = s.find('"', i + 1)
            j = len(s) if j < 0 else j
            out.append(s[i + 1:j])
            i = j + 1
        else:
            j = i
            while j < len(s) and s[j] not in " \t":
                j += 1
            out.append(s[i:j])
            i = j
    return out


def unescape(s):
    s = s.replace("\\-", "-").replace("\\(dq", '"').replace("\\e", "\\")
    s = s.replace("\\(em", "--").replace("\\(en", "-").replace("\\&", "").replace("\\ ", " ")
    s = re.sub(r"\\f[BIRP]", "", s)
    return s.replace("\\\\", "\\")


def roff_text(line):
    """The text one roff line contributes (font macros applied, no fonts)."""
    if line.startswith(".\\\""):
        return ""
    m = re.match(r"\.(B|I|BR|RB|IR|RI|BI|IB)(\s+(.*))?$", line)
    if m:
        args = [unescape(a) for a in roff_args(m.group(3) or "")]
        return (" " if m.group(1) in ("B", "I") else "").join(args)
    if line.startswith("."):
        return None  # another request: a break
    return unescape(line)


def sections(path):
    """{SECTION: [lines]} of a man page."""
    secs, cur = {}, None
    with open(path) as f:
        for line in f.read().splitlines():
            m = re.match(r'\.SH\s+"?([^"]*)"?', line)
            if m:
                cur = m.group(1).strip()
                secs[cur] = []
            elif cur:
                secs[cur].append(line)
    return secs


def norm(form):
    form = re.sub(r"\s+", " ", form).strip()
    form = re.sub(r"\s*\|\s*", "|", form)
    form = re.sub(r"\[\s+", "[", form)
    form = re.sub(r"\s+\]", "]", form)
    return re.sub(r"\s+\.\.\.", "...", form)


def synopsis_forms(lines):
    forms, cur = [], []
    for line in lines:
        if line.strip() in (".br", ".PP", ".sp"):
            forms.append(" ".join(cur))
            cur = []
            continue
        t = roff_text(line)
        if t:
            cur.append(t)
    forms.append(" ".join(cur))
    # "A | B" joining two whole forms of one program (pinctl help | pinctl --version)
    out = []
    for f in (norm(f) for f in forms if f.strip()):
        prog = f.split()[0]
        parts = f.split("|" + prog + " ")
        out += [parts[0]] + [prog + " " + x for x in parts[1:]]
    return out


def heading_options(lines):
    """Options named in .TP headings (the line after .TP)."""
    opts = set()
    for i, line in enumerate(lines[:-1]):
        if line.strip() == ".TP":
            t = roff_text(lines[i + 1]) or ""
            # a heading is the option and its arguments, not prose
            opts.update(OPT.findall(t))
    return opts


def usage_forms(prog, text):
    """The forms of the help's usage lines."""
    forms, in_usage = [], False
    for line in text.splitlines():
        m = re.match(r"\s*usage:\s*(.*)$", line, re.I)
        if m:
            in_usage = True
            line = m.group(1)
        elif not in_usage:
            continue
        elif not line.strip():
            in_usage = False
            continue
        words = line.split()
        if not words:
            continue
        if words[0] == prog:
            forms.append(line.strip())
        elif forms and line[:1].isspace():
            forms[-1] += " " + line.strip()
        else:
            in_usage = False
    return [norm(f) for f in forms]


def run_help(binary, args):
    r = subprocess.run([binary] + args + ["--help"], capture_output=True, text=True)
    if r.returncode != 0:
        fail("%s %s --help exits %d" % (os.path.basename(binary), " ".join(args), r.returncode))
    return r.stdout + r.stderr


def commands_of(help_text):
    """Commands a program's help lists under "Commands:" (two-space indent)."""
    cmds, inside = [], False
    for line in help_text.splitlines():
        if re.match(r"Commands:\s*$", line):
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            m = re.match(r"\s+([a-z][a-z-]*)\b", line)
            if m and m.group(1) != "help":
                cmds.append(m.group(1))
    return cmds


def lint(page, name):
    """groff's own warnings (bad macros, unbalanced fonts), where groff is installed."""
    try:
        r = subprocess.run(["groff", "-man", "-ww", "-z", "-Tutf8", page], capture_output=True,
                           text=True, env=dict(os.environ, LC_ALL="C.UTF-8"))
    except FileNotFoundError:
        return
    if r.returncode or r.stderr.strip():
        fail("%s: groff -man -ww warns:\n%s" % (name, r.stderr.rstrip()))


def check(page, binary):
    prog = os.path.basename(binary)
    secs = sections(page)
    name = os.path.relpath(page, ROOT)
    lint(page, name)
    top = run_help(binary, [])
    helps = [("", top)] + [(c, run_help(binary, [c])) for c in commands_of(top)]
    help_opts = set()
    forms = []
    for cmd, text in helps:
        help_opts.update(OPT.findall(text))
        forms += usage_forms(prog, text)
    syn = synopsis_forms(secs.get("SYNOPSIS", []))
    man_opts = set()
    for f in syn:
        man_opts.update(OPT.findall(f))
    for sec in ("OPTIONS", "COMMANDS"):
        man_opts |= heading_options(secs.get(sec, []))
    for o in sorted(help_opts - man_opts):
        fail("%s: %s --help has %s, the man page does not document it (SYNOPSIS or an OPTIONS/COMMANDS heading)"
             % (name, prog, o))
    for o in sorted(man_opts - help_opts):
        fail("%s documents %s, which no %s --help mentions (stale?)" % (name, o, prog))
    for f in forms:
        if re.match(r"\S+ [A-Z][A-Z_]+\b", f):
            continue  # the generic shape: NAME COMMAND [OPTIONS]
        if f not in syn:
            fail("%s: SYNOPSIS lacks the usage form of --help: %s\n    man page forms:\n      %s"
                 % (name, f, "\n      ".join(syn)))
    for s in syn:
        lead = s.split()[:2]
        like = [f for f in forms if f.split()[:2] == lead]
        if like and s not in forms:
            fail("%s: SYNOPSIS form differs from --help:\n    man:  %s\n    help: %s"
                 % (name, s, "\n          ".join(like)))
    print("man-check: %s: %d option(s), %d usage form(s) against %s --help%s"
          % (name, len(help_opts), len(forms), prog,
             "" if len(helps) == 1 else " and %d command(s)" % (len(helps) - 1)), flush=True)


def main():
    o = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    pages = sorted(p for p in os.listdir(os.path.join(ROOT, "man")) if re.search(r"\.[1-8]$", p))
    if not pages:
        fail("no man pages in man/")
    for p in pages:
        prog = p.rsplit(".", 1)[0]
        binary = os.path.join(o, prog)
        if not os.access(binary, os.X_OK):
            fail("man/%s: %s is not built" % (p, binary))
            continue
        check(os.path.join(ROOT, "man", p), binary)
    if errors:
        print("man-check: %d failure(s)" % errors)
        sys.exit(1)
    print("man-check: OK")


if __name__ == "__main__":
    main()
