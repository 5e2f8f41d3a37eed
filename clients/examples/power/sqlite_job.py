"""A job that does three steps, each one committed transaction of SQLite
(Python's sqlite3), then acknowledged on its standard output (the logs
live outside the world: another machine), then a point, `acked`. A
restart resumes after the last committed step.

    python3 sqlite_job.py init                 make jobs.db (a world's template)
    python3 sqlite_job.py JOURNAL SYNCHRONOUS  run: JOURNAL is delete or wal,
                                               SYNCHRONOUS off, normal, full or extra

The judge (judge.py) counts acknowledged steps done again: committed
transactions a power cut took back.
"""
import os
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import crashsweep  # noqa: E402

STEPS = 3

if sys.argv[1:] == ["init"]:
    db = sqlite3.connect("jobs.db")
    db.execute("create table if not exists steps (n integer primary key)")
    db.commit()
    db.close()
    sys.exit(0)

journal, synchronous = sys.argv[1], sys.argv[2]
if journal not in ("delete", "wal") or synchronous not in ("off", "normal", "full", "extra"):
    sys.exit(f"usage: {sys.argv[0]} delete|wal off|normal|full|extra")

db = sqlite3.connect("jobs.db", isolation_level=None)
db.execute(f"pragma journal_mode={journal}")
db.execute(f"pragma synchronous={synchronous}")
(n,) = db.execute("select count(*) from steps").fetchone()
while n < STEPS:
    n += 1
    db.execute("begin")
    db.execute("insert into steps (n) values (?)", (n,))
    db.execute("commit")
    print(f"acked {n}", flush=True)
    crashsweep.point("acked")
db.close()
