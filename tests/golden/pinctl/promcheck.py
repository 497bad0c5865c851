#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check Prometheus text exposition (node exporter textfile) line by line.

Grammar (prometheus/docs exposition_formats.md, text format 0.0.4):
  # HELP <name> <text>      at most once per family, before its samples
  # TYPE <name> <type>      at most once per family, before its samples
  <name>[{<label>="<value>",...}] <value> [<timestamp>]
Rules also checked: names and label names match their regexes, label values
use only the escapes \\\\ \\" \\n and are UTF-8, values are Go floats
(+Inf, -Inf, NaN allowed), the samples of a family are contiguous, no series
appears twice, counters end in _total, the text ends with a newline, no
blank lines.  Exit 1 with one line per problem.
"""
import re
import sys

NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*'
VALUE = r'(?:[+-]?(?:Inf|NaN)|[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)'
LVAL = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r'^(%s)(\{(?:%s=%s(?:,%s=%s)*,?)?\})? (%s)(?: (-?\d+))?$'
                    % (NAME, LABEL, LVAL, LABEL, LVAL, VALUE))
PAIR = re.compile(r'(%s)=(%s)' % (LABEL, LVAL))
HELP = re.compile(r'^# HELP (%s) (.*)$' % NAME)
TYPE = re.compile(r'^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$' % NAME)
SUFFIXES = ('_bucket', '_sum', '_count')


def family_of(name, types):
    if name in types:
        return name
    for s in SUFFIXES:
        if name.endswith(s) and types.get(name[:-len(s)]) in ('histogram', 'summary'):
            return name[:-len(s)]
    return name


def check(data):
    errors = []
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        return ['not UTF-8: %s' % e]
    if not text:
        return ['empty']
    if not text.endswith('\n'):
        errors.append('does not end with a newline')
    helps, types, done, series = set(), {}, set(), set()
    current = None
    nsamples = 0
    for no, line in enumerate(text.rstrip('\n').split('\n'), 1):
        where = 'line %d: ' % no
        if not line:
            errors.append(where + 'blank line')
            continue
        if line.startswith('#'):
            m = HELP.match(line)
            t = TYPE.match(line)
            if line.startswith('# HELP') and not m:
                errors.append(where + 'malformed HELP: %r' % line)
                continue
            if line.startswith('# TYPE') and not t:
                errors.append(where + 'malformed TYPE: %r' % line)
                continue
            name = (m or t).group(1) if (m or t) else None
            if name is None:
                continue    # a plain comment
            if name in done or (current and name != current and name in helps | set(types)):
                errors.append(where + '%s: metadata after its samples or split family' % name)
            if m:
                if name in helps:
                    errors.append(where + '%s: second HELP' % name)
                helps.add(name)
            else:
                if name in types:
                    errors.append(where + '%s: second TYPE' % name)
                types[name] = t.group(2)
                if t.group(2) == 'counter' and not name.endswith('_total'):
                    errors.append(where + '%s: counter name does not end in _total' % name)
            if current and current != name:
                done.add(current)
            current = name
            continue
        m = SAMPLE.match(line)
        if not m:
            errors.append(where + 'malformed sample: %r' % line)
            continue
        nsamples += 1
        name = m.group(1)
        fam = family_of(name, types)
        if fam in done:
            errors.append(where + '%s: family samples are not contiguous' % fam)
        if fam not in types:
            errors.append(where + '%s: sample without TYPE' % fam)
        if current and current != fam:
            done.add(current)
        current = fam
        labels = PAIR.findall(m.group(2) or '')
        names = [k for k, _ in labels]
        if len(set(names)) != len(names):
            errors.append(where + '%s: repeated label name' % name)
        key = (name, tuple(sorted(labels)))
        if key in series:
            errors.append(where + '%s: duplicate series %s' % (name, m.group(2) or ''))
        series.add(key)
    if not nsamples:
        errors.append('no samples')
    return errors


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else '-'
    data = sys.stdin.buffer.read() if path == '-' else open(path, 'rb').read()
    errors = check(data)
    for e in errors:
        print('promcheck: %s: %s' % (path, e))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
