"""Pays alice 10, bob 20 and carol 30 from the current directory, with its
progress saved by a writer thread: the way LangGraph's default
`durability="async"` saves checkpoints in the background. Swept unchanged
with `crashsweep --io-points`.

    python3 writer.py             # the buggy version: a crash can pay twice
    python3 writer.py --fixed     # the fixed version: payments carry a key
    python3 writer.py --payees=1  # alice alone (a shorter run)

The main thread pays (one line "payee amount" appended to ledger.txt and
synced), then hands the new progress to the writer thread and goes on to the
next payee. The writer saves each progress crash-safely to state.json (temp
file, fsync, rename, fsync of the directory) while the main thread pays on.
So the two threads' system calls interleave differently from run to run.

A restart resumes from state.json. The buggy version pays again every payee
whose progress the writer had not saved yet. The fixed version writes
"payee amount key=<payee>-<index>" and does not pay a key the ledger has.
"""

import json
import os
import queue
import sys
import threading

PAYEES = [("alice", 10), ("bob", 20), ("carol", 30)]


def load():
    try:
        with open("state.json") as f:
            return json.load(f)["next"]
    except FileNotFoundError:
        return 0


def save(next_index):
    with open("state.json.tmp", "w") as f:
        json.dump({"next": next_index}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename("state.json.tmp", "state.json")
    d = os.open(".", os.O_RDONLY)
    try:
        os.fsync(d)
    finally:
        os.close(d)


def writer(progress):
    """Save each progress the main thread hands over, until None."""
    while True:
        n = progress.get()
        if n is None:
            return
        save(n)


def already_paid(key):
    try:
        with open("ledger.txt") as f:
            return any(("key=" + key) in line.split() for line in f)
    except FileNotFoundError:
        return False


def pay(line):
    with open("ledger.txt", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def main():
    fixed = "--fixed" in sys.argv[1:]
    payees = PAYEES
    for arg in sys.argv[1:]:
        if arg.startswith("--payees="):
            payees = PAYEES[: int(arg[len("--payees="):])]
    progress = queue.Queue()
    saver = threading.Thread(target=writer, args=(progress,), name="writer")
    saver.start()
    i = load()
    while i < len(payees):
        payee, amount = payees[i]
        if not fixed:
            pay("%s %d" % (payee, amount))
        else:
            key = "%s-%d" % (payee, i)
            if not already_paid(key):
                pay("%s %d key=%s" % (payee, amount, key))
        i += 1
        progress.put(i)
    progress.put(None)
    saver.join()
    print("done")


if __name__ == "__main__":
    main()
