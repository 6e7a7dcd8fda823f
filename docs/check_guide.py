"""Checks the outputs the user guide shows against real runs.

Runs every `pcc compile` and `pcc plan` of docs/UserGuide.md whose model is
the bundled gpt2-tiny (test/models/gpt2-tiny.tar.gz) or a `--model gpt:`
description, in a scratch folder, and compares what the guide shows after
the command with what pcc prints: each shown line must be printed as it is
(`...` stands for lines left out). Other commands (models the guide's
reader exports) are listed as skipped. With --update, a shown line that
differs from a printed line only in its numbers is replaced by it, so that
the guide's outputs are regenerated rather than edited by hand (the one
that agrees longest with the shown line, among several of its shape).

usage: python3 check_guide.py PCC [--guide FILE] [--update]
Exits 1 when a shown line is not printed (and --update cannot fix it).
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def blocks(lines):
    """(index of the command line, command, [(index, shown line)])."""
    i = 0
    while i < len(lines):
        m = re.match(r"^    \$ (pcc (?:compile|plan) .*)$", lines[i])
        if not m:
            i += 1
            continue
        start, command = i, m.group(1)
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        shown = []
        i += 1
        while (i < len(lines) and lines[i].startswith("    ") and
               not lines[i].startswith("    $")):
            shown.append((i, lines[i][4:]))
            i += 1
        yield start, command, shown


def runnable(command):
    args = shlex.split(command)
    models = [a for a in args if a.endswith((".onnx", ".mlir"))]
    return all(m.startswith("gpt2-tiny/") for m in models) and (
        models or any(a.startswith("gpt:") for a in args))


def shape(line):
    """The line with its numbers blanked (not the digits of names, such as
    val_118 or h.0)."""
    return re.sub(r"(?<![A-Za-z_.])[0-9]+(\.[0-9]+)?", "#", line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pcc")
    ap.add_argument("--guide", default=os.path.join(HERE, "UserGuide.md"))
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    a.pcc = os.path.abspath(a.pcc)
    lines = open(a.guide).read().split("\n")
    failures = checked = skipped = updated = 0
    with tempfile.TemporaryDirectory() as work:
        with tarfile.open(os.path.join(ROOT, "test", "models",
                                       "gpt2-tiny.tar.gz")) as t:
            t.extractall(work)
        # The guide's refusal to replace a folder pcc did not write.
        os.makedirs(os.path.join(work, "keep"))
        open(os.path.join(work, "keep", "notes.txt"), "w").write("mine\n")
        for start, command, shown in blocks(lines):
            if not runnable(command):
                skipped += 1
                continue
            checked += 1
            args = shlex.split(command)
            r = subprocess.run([a.pcc] + args[1:], cwd=work,
                               capture_output=True, text=True)
            printed = (r.stderr + r.stdout).split("\n")
            printed_set = set(printed)
            for index, line in shown:
                if line.strip() == "..." or line in printed_set:
                    continue
                # "..." inside a line leaves out part of it.
                if "..." in line:
                    pattern = ".*".join(re.escape(p) for p in line.split("..."))
                    if any(re.fullmatch(pattern, p) for p in printed):
                        continue
                # The printed line of the same shape that agrees longest,
                # among those the block does not already show (a stage's
                # line is not replaced by another stage's).
                block = {lines[i][4:] for i, _ in shown}
                same = sorted(
                    (p for p in printed
                     if shape(p) == shape(line) and p not in block),
                    key=lambda p: -len(os.path.commonprefix([p, line])))
                if a.update and same:
                    lines[index] = "    " + same[0]
                    updated += 1
                    continue
                failures += 1
                print(f"{a.guide}:{index + 1}: not printed by `{command}`:\n"
                      f"  shown:   {line}\n" +
                      "".join(f"  printed: {p}\n" for p in same[:2]))
    if a.update and updated:
        open(a.guide, "w").write("\n".join(lines))
    print(f"check_guide: {checked} command(s) run, {skipped} skipped, "
          f"{updated} line(s) updated, {failures} not printed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
