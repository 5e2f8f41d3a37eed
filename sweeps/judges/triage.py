"""The judge of the triage process sweep (sweeps/triage-process.sweep.json).

Run by the sweep after a scenario's final life, with the scenario's world
directory as the current directory (it holds the `state/` directory the
`triage` command ran on), CRASHSWEEP_LOGS naming the directory of each
life's output (`life-N.out`, one JSON event a line, since triage runs with
--json) and, when the scenario has a tracker service, CRASHSWEEP_SERVICE its
URL. Prints one JSON object of counters, each of which must be zero:

  runs+       runs beyond the first in the state directory: a restart that
              started the job again instead of resuming (or answering) it
  dups        effects beyond the first: issues of one title, comments of one
              body on one issue (the task's seed issues included)
  re-asked    model turns asked again after a life had saved their reply
  unfinished  1 if the final life did not end with the run done
  failed      the task's checks that failed, as the final life reports them
"""

import glob
import json
import os
import re
import urllib.request

RUN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*-[0-9]+-[a-z0-9]{8}\.json$")


def events(path):
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut short by the kill
    except FileNotFoundError:
        pass
    return out


def issues():
    service = os.environ.get("CRASHSWEEP_SERVICE")
    if service:
        with urllib.request.urlopen(service.rstrip("/") + "/issues", timeout=10) as r:
            return json.load(r)
    found = []
    for path in glob.glob("state/*.world/tracker.json"):
        with open(path, encoding="utf-8") as f:
            found.extend(json.load(f)["issues"])
    return found


runs = [n for n in os.listdir("state") if RUN.match(n)] if os.path.isdir("state") else []

dups = 0
titles = {}
for issue in issues():
    titles[issue["title"]] = titles.get(issue["title"], 0) + 1
    bodies = {}
    for c in issue.get("comments", []):
        bodies[c["body"]] = bodies.get(c["body"], 0) + 1
    dups += sum(n - 1 for n in bodies.values())
dups += sum(n - 1 for n in titles.values())

logs = os.environ["CRASHSWEEP_LOGS"]
lives = sorted(
    (int(m.group(1)), os.path.join(logs, n))
    for n in os.listdir(logs)
    if (m := re.fullmatch(r"life-([0-9]+)\.out", n))
)
saved = set()
reasked = 0
for _, path in lives:
    for e in events(path):
        if e.get("event") == "model_call" and e.get("turn") in saved:
            reasked += 1
        if e.get("event") == "reply_saved":
            saved.add(e.get("turn"))

summary = None
if lives:
    summary = next((e for e in events(lives[-1][1]) if e.get("event") == "summary"), None)
done = summary is not None and summary.get("status") == "done"
failed = sum(1 for c in (summary or {}).get("checks", []) if not c.get("passed"))

print(json.dumps({
    "runs+": max(0, len(runs) - 1),
    "dups": dups,
    "re-asked": reasked,
    "unfinished": 0 if done else 1,
    "failed": failed,
}))
