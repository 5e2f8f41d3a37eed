"""Judges a payouts world: run with the world directory as the current
directory, after the last life. Prints one JSON object on stdout,

    {"duplicates": N, "missing": N}

duplicates: payments beyond the first per payee; missing: payees never paid.
It reads ledger.txt, one payment per line, "payee amount" (buggy version) or
"payee amount key=<payee>-<index>" (fixed version); a line it cannot read
(one cut short, with no newline at its end) is not a payment. Exits 0 whatever it finds.

Under `crashsweep --fork-server` it is forked too: it runs once to
crashsweep.ready(), after its imports, and each judge is a child forked
there in its world's directory (ready() does nothing otherwise). It closes
what it opens, so it can skip Python's teardown (exit_fast=True).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import crashsweep  # noqa: E402

crashsweep.ready(exit_fast=True)

PAYEES = ["alice", "bob", "carol"]

paid = {name: 0 for name in PAYEES}
try:
    with open("ledger.txt", encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            if line.endswith("\n") and len(fields) >= 2 and fields[0] in PAYEES:
                paid[fields[0]] += 1
except FileNotFoundError:
    pass

print(json.dumps({
    "duplicates": sum(max(0, n - 1) for n in paid.values()),
    "missing": sum(1 for n in paid.values() if n == 0),
}))
