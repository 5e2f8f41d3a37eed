"""Judges the LangGraph agent's world after its last life: asks the tracker
(its URL is the first argument, or CRASHSWEEP_SERVICE) for its tickets and
prints one JSON object on stdout,

    {"duplicates": N, "missing": N}

duplicates: tickets beyond the first per title; missing: titles the agent
was to file and never did. `--tickets N`: the agent was told to file the
first N (all three unless told). Standard library only. Exits 0 whatever
it finds. Under `crashsweep --fork-server` each judge is forked from one
process that ran to crashsweep.ready() after its imports.
"""

import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import crashsweep  # noqa: E402

crashsweep.ready(exit_fast=True)

# The titles agent.py's model asks its tool to file, in order.
TITLES = ["Disk full on db-1", "Login page slow", "Typo on pricing page"]

args = sys.argv[1:]
if "--tickets" in args:
    TITLES = TITLES[: int(args[args.index("--tickets") + 1])]
urls = [a for a in args if a.startswith("http")]
url = urls[0] if urls else os.environ["CRASHSWEEP_SERVICE"]
with urllib.request.urlopen(url + "/tickets", timeout=10) as r:
    tickets = json.load(r)
filed = {title: 0 for title in TITLES}
for t in tickets:
    filed[t["title"]] = filed.get(t["title"], 0) + 1
print(json.dumps({
    "duplicates": sum(max(0, n - 1) for n in filed.values()),
    "missing": sum(1 for title in TITLES if filed[title] == 0),
}))
