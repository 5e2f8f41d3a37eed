"""A tiny issue tracker: the service the LangGraph agent's tool posts to.

    python3 tracker.py

It listens on a free loopback port and prints its URL on its first line,
as crashsweep's --service wants. POST /tickets with a JSON body
{"title": ...} files a ticket. A body with a "key" (an idempotency key)
files nothing when a ticket already has that key: the tracker answers with
the old ticket. GET /tickets lists the tickets as a JSON array. Each new
ticket is also appended to tickets.jsonl in the current directory (the
service's own directory), for --artifacts. Standard library only: it
runs with any Python 3.
"""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer

TICKETS = []


class Handler(BaseHTTPRequestHandler):
    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path != "/tickets":
            return self.reply(404, {"error": "no such path"})
        self.reply(200, TICKETS)

    def do_POST(self):
        if self.path != "/tickets":
            return self.reply(404, {"error": "no such path"})
        length = int(self.headers.get("Content-Length", "0"))
        ticket = json.loads(self.rfile.read(length))
        key = ticket.get("key")
        if key is not None:
            for old in TICKETS:
                if old.get("key") == key:
                    return self.reply(200, {"id": old["id"], "repeated": True})
        ticket["id"] = len(TICKETS) + 1
        TICKETS.append(ticket)
        with open("tickets.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(ticket) + "\n")
        self.reply(201, {"id": ticket["id"]})

    def log_message(self, *args):
        pass


def main():
    server = HTTPServer(("127.0.0.1", 0), Handler)
    host, port = server.server_address[:2]
    print("http://%s:%d" % (host, port), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
