"""The judge of state.py and sqlite_job.py: `lost` counts acknowledged
steps done again (the restart did not find them saved), `missing` the
steps never done at the end. Run in the world directory, with
CRASHSWEEP_LOGS naming the lives' logs."""
import collections
import glob
import json
import os
import sys

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
acks = collections.Counter()
for path in glob.glob(os.path.join(os.environ["CRASHSWEEP_LOGS"], "life-*.out")):
    with open(path) as f:
        for line in f:
            if line.startswith("acked "):
                acks[int(line.split()[1])] += 1
lost = sum(c - 1 for c in acks.values())
missing = sum(1 for k in range(1, steps + 1) if acks[k] == 0)
print(json.dumps({"lost": lost, "missing": missing}))
