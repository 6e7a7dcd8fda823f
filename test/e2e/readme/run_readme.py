"""Runs the README's "Use" commands as printed, one after another, in a
fresh folder where `build/` is the build under test and `test/` the
repository's test tree: what a new user does from the repository's root.

    run_readme.py README.md BUILD_DIR SOURCE_DIR WORK_DIR

A command may continue over lines ending in a backslash; the comments after
`#` are the shell's. A command that ends in `&` starts a server: the next
command (a client) is retried for up to 30 s while the server starts, and
the server is stopped (SIGTERM, then waited for) at the end. Each command's
output goes to WORK_DIR/readme.log; the first that fails is printed with
the end of its output, and the script exits 1. Prints "ok N commands".
"""

import os
import signal
import subprocess
import sys
import time

readme, build, source, work = sys.argv[1:5]

text = open(readme).read()
start = text.index("## Use\n")
block = []
for line in text[start:].split("\n")[1:]:
    if line.startswith("## "):
        break
    if line.startswith("    "):
        block.append(line[4:])
commands = []
for line in block:
    if commands and commands[-1].endswith("\\"):
        commands[-1] = commands[-1][:-1] + " " + line.strip()
    else:
        commands.append(line)

os.makedirs(work, exist_ok=True)
for name, target in (("build", build), ("test", os.path.join(source, "test"))):
    link = os.path.join(work, name)
    if not os.path.lexists(link):
        os.symlink(target, link)
env = dict(os.environ)
# The system's Python, whose numpy the tests use and for which the module
# is built.
env["PATH"] = "/usr/bin:" + env.get("PATH", "")
log = open(os.path.join(work, "readme.log"), "w")
servers = []
retry = False


def fail(command, output):
    print("FAIL: %s\n%s" % (command, output[-3000:]))
    stop()
    sys.exit(1)


def stop():
    for server in servers:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


for command in commands:
    log.write("$ " + command + "\n")
    log.flush()
    if command.rstrip().split("#")[0].rstrip().endswith("&"):
        servers.append(subprocess.Popen(
            ["bash", "-c", command.split("#")[0].rstrip()[:-1]], cwd=work,
            env=env, stdout=log, stderr=subprocess.STDOUT))
        retry = True
        continue
    deadline = time.time() + (30 if retry else 0)
    while True:
        run = subprocess.run(["bash", "-c", "set -o pipefail; " + command],
                             cwd=work, env=env, capture_output=True,
                             text=True, timeout=900)
        if run.returncode == 0 or time.time() > deadline:
            break
        time.sleep(0.5)
    retry = False
    log.write(run.stdout + run.stderr)
    log.flush()
    if run.returncode != 0:
        fail(command, run.stdout + run.stderr)
stop()
print("ok %d commands" % len(commands))
