"""Pays alice 10, bob 20 and carol 30 from the current directory, surviving
crashes: the crashsweep example for Python.

    python3 payouts.py           # the buggy version: a crash can pay twice
    python3 payouts.py --fixed   # the fixed version: payments carry a key

state.json ({"next": k}) is the durable progress, saved crash-safely (temp
file, fsync, rename, fsync of the directory). ledger.txt is the outside
world, a payment service: one line "payee amount" per payment. The buggy
version pays, then saves; a crash between the two repays on restart. The
fixed version writes "payee amount key=<payee>-<index>" and, like a service
that honours idempotency keys, does not pay a key the ledger already has.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import crashsweep  # noqa: E402

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
    crashsweep.point("mid-save")
    os.rename("state.json.tmp", "state.json")
    d = os.open(".", os.O_RDONLY)
    try:
        os.fsync(d)
    finally:
        os.close(d)


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
    # Set-up done: under a fork server, each life starts here (and ends
    # without Python's teardown: every file is closed by `with`).
    crashsweep.ready(exit_fast=True)
    fixed = "--fixed" in sys.argv[1:]
    i = load()
    while i < len(PAYEES):
        payee, amount = PAYEES[i]
        if not fixed:
            pay("%s %d" % (payee, amount))
        else:
            key = "%s-%d" % (payee, i)
            if not already_paid(key):
                pay("%s %d key=%s" % (payee, amount, key))
        crashsweep.point("paid")
        i += 1
        save(i)
    print("done")


if __name__ == "__main__":
    main()
