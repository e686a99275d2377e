# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The command examples of a document, as its reader sees them, for
# tests/test-doc-examples.sh.
#
# usage: doc-examples.py FILE OUT-DIR
#
# FILE is Markdown (README.md: each fenced block without a language)
# or POD (a man page: each verbatim paragraph, but those of the
# SYNOPSIS and output samples, which start with "{").  Writes each
# example to OUT-DIR/NNN.sh, in order, and prints one line per example:
#
#   NNN LINE run
#   NNN LINE needs COMMAND      (run only where COMMAND is installed)
#   NNN LINE not-run REASON     (never run: it cannot run here)
#
# An example is marked by a comment just before it: in Markdown
# "<!-- example needs COMMAND -->" or "<!-- example not run: REASON -->",
# in POD "=for comment example needs COMMAND" (or "not run: REASON").

import os
import re
import sys

MARK = re.compile(r"example (needs (\S+)|not run: (.+))")


def marker(text):
    m = MARK.search(text or "")
    if not m:
        return "run"
    if m.group(2):
        return "needs " + m.group(2)
    return "not-run " + m.group(3).strip().removesuffix("-->").strip()


def markdown(lines):
    prev, i = None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            lang, start, body = line[3:].strip(), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if not lang:
                yield start, "".join(body), marker(prev)
        elif line.strip():
            prev = line
        i += 1


def pod(lines):
    section, prev, i = "", None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("=head1"):
            section = line.split(None, 1)[1].strip()
        if line[:1] in (" ", "\t"):
            start, body = i + 1, []
            while i < len(lines) and lines[i].strip():
                body.append(lines[i])
                i += 1
            text = "".join(body)
            if section != "SYNOPSIS" and not text.lstrip().startswith("{"):
                # Verbatim text is indented in the page, not in the shell.
                indent = min(len(l) - len(l.lstrip()) for l in body
                             if l.strip())
                text = "".join(l[indent:] for l in body)
                yield start, text, marker(prev)
            continue
        if line.strip():
            prev = line
        i += 1


def main():
    path, out = sys.argv[1:3]
    with open(path) as f:
        lines = f.readlines()
    parse = pod if path.endswith(".pod") else markdown
    for n, (line, text, mark) in enumerate(parse(lines), 1):
        with open(os.path.join(out, "%03d.sh" % n), "w") as f:
            f.write(text)
        print("%03d %d %s" % (n, line, mark))


main()
