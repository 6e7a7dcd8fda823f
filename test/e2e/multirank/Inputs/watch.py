"""Runs a command and reports how it ended, for FileCheck: its exit status,
its stdout and stderr lines, whether it ended within BOUND seconds, and the
processes whose command line contains PATTERN that are left once it has.
Usage: watch.py BOUND PATTERN -- COMMAND..."""
import os
import subprocess
import sys
import time

bound, pattern = float(sys.argv[1]), sys.argv[2]
command = sys.argv[sys.argv.index("--") + 1:]
start = time.monotonic()
try:
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=bound + 30)
    status, out, err = done.returncode, done.stdout, done.stderr
except subprocess.TimeoutExpired as e:
    status, out, err = "timeout", e.stdout or "", e.stderr or ""
    if isinstance(out, bytes):
        out, err = out.decode(), err.decode()
elapsed = time.monotonic() - start
print("exit", status)
for line in out.splitlines():
    print("stdout:", line)
for line in err.splitlines():
    print("stderr:", line)
print("elapsed within bound" if elapsed <= bound else
      "elapsed %.1f s, more than %g" % (elapsed, bound))
left = subprocess.run(["pgrep", "-af", pattern], capture_output=True,
                      text=True).stdout.splitlines()
left = [p for p in left if int(p.split()[0]) != os.getpid()]
print("left:", "; ".join(left) if left else "none")
