"""Two threads, each passing two named points (the point protocol, through
clients/python/crashsweep.py) and appending a line to a file of its own (synced):
main.txt for the main thread, writer.txt for the writer thread. Their
points interleave differently from run to run. Every life does the same
work from the start, so each life passes the same four hits whatever the
interleaving, and a sweep at depth 2 runs the same scenarios every time.

    python3 points.py
"""

import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from crashsweep import point  # noqa: E402


def steps(who):
    for k in (1, 2):
        point(who + " step")
        with open(who + ".txt", "a") as f:
            f.write("%s %d\n" % (who, k))
            f.flush()
            os.fsync(f.fileno())


def main():
    writer = threading.Thread(target=steps, args=("writer",), name="writer")
    writer.start()
    steps("main")
    writer.join()
    print("done")


if __name__ == "__main__":
    main()
