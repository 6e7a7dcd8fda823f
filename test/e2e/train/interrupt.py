"""Runs a command, sends it SIGTERM once its output shows `step N:` (N from
--after, default 3), and prints its exit status and its output.

usage: interrupt.py [--after N] COMMAND...
"""
import re
import signal
import subprocess
import sys
import time


def main(argv):
    after = 3
    if argv[:1] == ["--after"]:
        after, argv = int(argv[1]), argv[2:]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    sent = False
    deadline = time.time() + 120
    for line in proc.stdout:
        lines.append(line)
        m = re.match(r"step (\d+):", line)
        if not sent and m and int(m.group(1)) >= after:
            proc.send_signal(signal.SIGTERM)
            sent = True
        if time.time() > deadline:
            proc.kill()
            break
    rc = proc.wait()
    sys.stdout.write("".join(lines))
    print("exit status %d%s" % (rc, "" if sent else " (never interrupted)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
