"""agent.py with named crash points around its checkpointer and in its
tool, for sweeps without the tracer (and with crashsweep's fork server):

    python agent_points.py [URL] [--fixed] [--durability sync|exit]

The points, all passed on the thread that makes the call:

- `put` before LangGraph's SqliteSaver saves a checkpoint;
- `put-writes` before it saves a task's pending writes;
- `posted` after the tool's post reached the tracker, before it returns.

LangGraph itself is unchanged: a subclass of SqliteSaver marks its two
writes, and the tool's post is wrapped.
"""

import sys

sys.dont_write_bytecode = True  # nothing written next to the example

import agent  # noqa: E402
from agent import crashsweep  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402


class PointedSaver(SqliteSaver):
    def put(self, config, checkpoint, metadata, new_versions):
        crashsweep.point("put")
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):
        crashsweep.point("put-writes")
        return super().put_writes(config, writes, task_id, task_path)


_post = agent.post


def post(url, body):
    ticket = _post(url, body)
    crashsweep.point("posted")
    return ticket


agent.post = post

if __name__ == "__main__":
    agent.main(saver=PointedSaver)
