"""A LangGraph agent that files three tickets with a tracker, surviving
crashes the way LangGraph offers: swept unchanged with
`crashsweep --io-points` (no crash point in it, none in LangGraph).

    python agent.py [URL]            # the buggy version: a crash can file twice
    python agent.py [URL] --fixed    # the fixed version: posts carry a key

URL is the tracker's (tracker.py), by default CRASHSWEEP_SERVICE, which
crashsweep sets to its --service's URL.
The graph is LangGraph's usual tool loop: a chat model node and a
ToolNode. The model is a fake one from langchain_core that answers by the
conversation so far, as a real model at temperature 0 would: it asks for
one ticket per turn, then says it is done. The tool posts each ticket to
the tracker.

Its checkpoints are in checkpoints.db in the current directory (the world),
written by LangGraph's SqliteSaver in LangGraph's default durability
("async": on a background thread). A run that finds a checkpoint of its
thread resumes it with invoke(None, config). `--durability sync|exit`
picks another mode, for comparison. `--tickets N` files only the first N
(the tests file one, for a sweep a third as long; tell the judge too).

The buggy tool posts without a key. A crash after its post and before
LangGraph has saved the tool's result runs the tool again on resume: a
second ticket. The fixed tool sends an idempotency key made of the thread
id and the tool call's id; the tracker files nothing for a key it has.
"""

import json
import os
import sys
import urllib.request
from typing import Annotated

from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

# crashsweep's Python client, for its fork server only: no crash point here.
sys.dont_write_bytecode = True  # nothing written next to the client
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import crashsweep  # noqa: E402

TITLES = ["Disk full on db-1", "Login page slow", "Typo on pricing page"]


def script(n):
    """What the model answers at its k-th turn: a tool call for each of the
    first n tickets, then done."""
    return [
        AIMessage(
            content="",
            tool_calls=[{"name": "file_ticket", "args": {"title": t}, "id": "call_%d" % (i + 1)}],
        )
        for i, t in enumerate(TITLES[:n])
    ] + [AIMessage(content="Filed %d tickets." % n)]


# The model's script: set by main from --tickets N (3 unless told).
SCRIPT = script(len(TITLES))

THREAD = "triage-1"


def post(url, body):
    """POST body (JSON) to the tracker's /tickets; the ticket's id."""
    req = urllib.request.Request(
        url + "/tickets",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["id"]


# The tracker's URL, known once the life starts (after ready()).
URL = None


def make_tool(fixed):
    @tool
    def file_ticket(
        title: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
    ) -> str:
        """File a ticket with the tracker."""
        body = {"title": title}
        if fixed:
            body["key"] = "%s/%s" % (config["configurable"]["thread_id"], tool_call_id)
        return "ticket %s" % post(URL, body)

    return file_ticket


def model(state: MessagesState):
    # The model's answer depends on the conversation only: a restarted
    # process answers the same at the same turn.
    turn = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
    llm = FakeMessagesListChatModel(responses=SCRIPT[turn:])
    return {"messages": [llm.invoke(state["messages"])]}


def build(fixed):
    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode([make_tool(fixed)]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    g.add_edge("tools", "model")
    return g


def main(saver=SqliteSaver):
    global SCRIPT, URL
    args = sys.argv[1:]
    fixed = "--fixed" in args
    durability = None
    if "--durability" in args:
        durability = args[args.index("--durability") + 1]
    if "--tickets" in args:
        SCRIPT = script(int(args[args.index("--tickets") + 1]))
    # The graph and its tool's schema: set-up, the same for every life.
    g = build(fixed)
    # The end of the set-up (about a second of imports, a third of a
    # life's work after them). Under `crashsweep --fork-server` every life
    # is forked from here; anywhere else this does nothing. The world
    # (checkpoints.db) and the service's URL are the life's own: after it.
    crashsweep.ready(exit_fast=True)
    urls = [a for a in args if a.startswith("http")]
    URL = urls[0] if urls else os.environ["CRASHSWEEP_SERVICE"]
    config = {"configurable": {"thread_id": THREAD}}
    kwargs = {} if durability is None else {"durability": durability}
    with saver.from_conn_string("checkpoints.db") as checkpointer:
        graph = g.compile(checkpointer=checkpointer)
        if checkpointer.get_tuple(config) is None:
            start = {"messages": [HumanMessage("File our %d open problems." % (len(SCRIPT) - 1))]}
        else:
            start = None  # resume the thread from its last checkpoint
        out = graph.invoke(start, config, **kwargs)
    print(out["messages"][-1].content)


if __name__ == "__main__":
    main()
