#!/usr/bin/env python3
"""Ports for the torchrun-style tests.

usage: port.py free            print a TCP port that nothing listens on now
       port.py pair            print a TCP port that nothing listens on now,
                               and whose next one is free too
       port.py taken CMD ARG...  run CMD with MASTER_PORT set to a port that
                                 this script listens on (and never answers
                                 on), and exit with CMD's status
       port.py hold FILE         listen on a port whose next one is free too,
                                 as torchrun's agent does at MASTER_PORT, and
                                 write it to FILE; hold it until killed (at
                                 most 120 s)
"""
import os
import socket
import subprocess
import sys
import time


def listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("", 0))
    return s


def listener_beside_free():
    """A bound socket whose port's next one nothing is bound to."""
    while True:
        s = listener()
        port = s.getsockname()[1]
        try:
            beside = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            beside.bind(("", port + 1))
            beside.close()
            return s
        except OSError:
            s.close()


def main(argv):
    if argv[:1] == ["free"] and len(argv) == 1:
        s = listener()
        print(s.getsockname()[1])
        return 0
    if argv[:1] == ["pair"] and len(argv) == 1:
        s = listener_beside_free()
        print(s.getsockname()[1])
        return 0
    if argv[:1] == ["taken"] and len(argv) > 1:
        s = listener()
        s.listen(8)
        env = dict(os.environ, MASTER_PORT=str(s.getsockname()[1]))
        return subprocess.call(argv[1:], env=env)
    if argv[:1] == ["hold"] and len(argv) == 2:
        s = listener_beside_free()
        port = s.getsockname()[1]
        s.listen(8)
        with open(argv[1] + ".tmp", "w") as f:
            f.write(str(port))
        os.rename(argv[1] + ".tmp", argv[1])
        time.sleep(120)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
