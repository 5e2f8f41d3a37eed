"""A job that does three steps, saves its state after each with
write-temp-and-rename, then acknowledges the step on its standard output
(the logs live outside the world: another machine). A restart resumes from
the saved state.

    python3 state.py nosync    no fsync at all
    python3 state.py file      the file synced, not its directory
    python3 state.py full      the file and its directory synced

The judge (judge.py) counts acknowledged steps done again after a restart:
work a power cut lost.
"""
import os
import sys

STEPS = 3
mode = sys.argv[1] if len(sys.argv) > 1 else "full"
if mode not in ("nosync", "file", "full"):
    sys.exit(f"unknown mode {mode!r}: nosync, file or full")


def load():
    try:
        with open("state") as f:
            text = f.read()
    except FileNotFoundError:
        return 0
    try:
        return int(text)
    except ValueError:
        # A torn or empty file: start over (and say so).
        print(f"state unreadable ({text!r}): starting over", file=sys.stderr)
        return 0


def save(n):
    with open("state.tmp", "w") as f:
        f.write(str(n))
        f.flush()
        if mode in ("file", "full"):
            os.fsync(f.fileno())
    os.rename("state.tmp", "state")
    if mode == "full":
        d = os.open(".", os.O_RDONLY)
        try:
            os.fsync(d)
        finally:
            os.close(d)


n = load()
while n < STEPS:
    n += 1
    save(n)
    print(f"acked {n}", flush=True)
