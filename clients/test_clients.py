"""Tests of the point clients (Python, Go, Node) and the payouts examples.

    python3 clients/test_clients.py

Self-contained: a tiny reference harness speaks point protocol 1 (a socket
pair, one end passed to the program as CRASHSWEEP_FD, "go" answered to every
hit, or SIGKILL at a chosen one). Needs python3, go and node on PATH; builds
the Go programs into a temporary directory, offline. Prints
"N passed, M failed" last and exits 1 if any failed.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback

CLIENTS = os.path.dirname(os.path.abspath(__file__))
JUDGE = os.path.join(CLIENTS, "examples", "judge.py")
WORLD = os.path.join(CLIENTS, "examples", "world")
TMP = tempfile.mkdtemp(prefix="crashsweep-clients-")
TIMEOUT = 60

CLEAN = ["paid#1", "mid-save#1", "paid#2", "mid-save#2", "paid#3", "mid-save#3"]


def base_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRASHSWEEP_")}
    env.update(extra)
    return env


class Life:
    """One run of a program: its hits (labelled name#n), how it ended."""

    def __init__(self, hits, returncode, stdout, stderr):
        self.hits, self.returncode, self.stdout, self.stderr = hits, returncode, stdout, stderr

    def __repr__(self):
        return "Life(hits=%r, returncode=%r, stdout=%r, stderr=%r)" % (
            self.hits, self.returncode, self.stdout, self.stderr)


def harness(cmd, cwd, crash_at=None, env=None, protocol="1", answer=b"go\n",
            close_at_first_hit=False, nonblocking=False):
    """Run cmd under the reference harness. crash_at: a label (name#n) to
    SIGKILL the program at; the harness checks that it died of signal 9.
    {FD} and {INODE} in cmd's arguments become the program's descriptor and
    its socket's inode."""
    parent, child = socket.socketpair()
    child.setblocking(not nonblocking)
    fd, inode = str(child.fileno()), str(os.fstat(child.fileno()).st_ino)
    cmd = [arg.replace("{FD}", fd).replace("{INODE}", inode) for arg in cmd]
    env = base_env(**(env or {}))
    env["CRASHSWEEP_FD"] = str(child.fileno())
    if protocol is not None:
        env["CRASHSWEEP_PROTOCOL"] = protocol
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, pass_fds=[child.fileno()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.close()
    parent.settimeout(TIMEOUT)
    reader = parent.makefile("rb")
    hits, counts, killed = [], {}, False
    try:
        while True:
            line = reader.readline()
            if not line:
                break  # end of file: the program (and every copy of its end) is gone
            m = re.fullmatch(rb"hit ([^\n\r]+)\n", line)
            assert m, "malformed hit line %r" % line
            name = m.group(1).decode("utf-8")
            counts[name] = counts.get(name, 0) + 1
            label = "%s#%d" % (name, counts[name])
            hits.append(label)
            if close_at_first_hit:
                break
            if label == crash_at:
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
                break
            parent.sendall(answer)
    finally:
        reader.close()
        parent.close()
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    if killed:
        assert proc.returncode == -signal.SIGKILL, "not killed by signal 9: %r" % proc.returncode
    return Life(hits, proc.returncode, stdout.decode(), stderr.decode())


def plain(cmd, cwd, env=None):
    """Run cmd with no harness."""
    proc = subprocess.run(cmd, cwd=cwd, env=base_env(**(env or {})), capture_output=True,
                          timeout=TIMEOUT)
    return Life([], proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def fresh_world():
    d = tempfile.mkdtemp(dir=TMP, prefix="world-")
    shutil.rmtree(d)
    shutil.copytree(WORLD, d)
    return d


def judge(world):
    out = subprocess.run([sys.executable, JUDGE], cwd=world, capture_output=True, check=True,
                         timeout=TIMEOUT).stdout
    return json.loads(out)


def ledger(world):
    with open(os.path.join(world, "ledger.txt")) as f:
        return f.read().splitlines()


# ---- the programs under test --------------------------------------------------

PY_PROBE = r'''
import os, subprocess, sys
sys.path.insert(0, %r)
import crashsweep
for arg in sys.argv[1:]:
    if arg.startswith("p:"):
        crashsweep.point(arg[2:])
    elif arg.startswith("bad:"):
        try:
            crashsweep.point(arg[4:].replace("NL", "\n").replace("CR", "\r"))
            print("accepted")
        except ValueError:
            print("refused")
    elif arg.startswith("sh:"):
        sys.stdout.flush()
        subprocess.run(["sh", "-c", arg[3:]])
sys.stdout.flush()
''' % os.path.join(CLIENTS, "python")

NODE_PROBE = r'''
const { execFileSync } = require('child_process');
const { point } = require(%s);
for (const arg of process.argv.slice(2)) {
  if (arg.startsWith('p:')) point(arg.slice(2));
  else if (arg.startsWith('bad:')) {
    try {
      point(arg.slice(4).replace('NL', '\n').replace('CR', '\r'));
      console.log('accepted');
    } catch (e) {
      console.log('refused');
    }
  } else if (arg.startsWith('sh:')) {
    process.stdout.write(execFileSync('sh', ['-c', arg.slice(3)]));
  }
}
''' % json.dumps(os.path.join(CLIENTS, "node", "crashsweep.js"))

GO_PROBE = r'''
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"crashsweep.dev/clients/go/crashsweep"
)

func main() {
	for _, arg := range os.Args[1:] {
		switch {
		case strings.HasPrefix(arg, "p:"):
			crashsweep.Point(arg[2:])
		case strings.HasPrefix(arg, "bad:"):
			name := strings.NewReplacer("NL", "\n", "CR", "\r").Replace(arg[4:])
			func() {
				defer func() {
					if recover() != nil {
						fmt.Println("refused")
					}
				}()
				crashsweep.Point(name)
				fmt.Println("accepted")
			}()
		case strings.HasPrefix(arg, "sh:"):
			cmd := exec.Command("sh", "-c", arg[3:])
			cmd.Stdout = os.Stdout
			cmd.Stderr = os.Stderr
			cmd.Run()
		}
	}
}
'''


def go_build():
    env = base_env(GOFLAGS="-mod=mod", GOPROXY="off", GOCACHE=os.path.join(TMP, "gocache"),
                   GOPATH=os.path.join(TMP, "gopath"), CGO_ENABLED="0")
    out = os.path.join(TMP, "go")
    os.makedirs(out)
    subprocess.run(["go", "build", "-o", os.path.join(out, "payouts"), "./examples/payouts"],
                   cwd=os.path.join(CLIENTS, "go"), env=env, check=True, timeout=600)
    probe = os.path.join(TMP, "goprobe")
    os.makedirs(probe)
    with open(os.path.join(probe, "go.mod"), "w") as f:
        f.write("module probe\n\ngo 1.19\n\nrequire crashsweep.dev/clients/go v0.0.0\n\n"
                "replace crashsweep.dev/clients/go => %s\n" % os.path.join(CLIENTS, "go"))
    with open(os.path.join(probe, "main.go"), "w") as f:
        f.write(GO_PROBE)
    subprocess.run(["go", "build", "-o", os.path.join(out, "probe"), "."],
                   cwd=probe, env=env, check=True, timeout=600)
    return out


def languages():
    py_probe = os.path.join(TMP, "probe.py")
    with open(py_probe, "w") as f:
        f.write(PY_PROBE)
    node_probe = os.path.join(TMP, "probe.js")
    with open(node_probe, "w") as f:
        f.write(NODE_PROBE)
    go = go_build()
    return {
        "python": ([sys.executable, os.path.join(CLIENTS, "python", "examples", "payouts.py")],
                   [sys.executable, py_probe]),
        "go": ([os.path.join(go, "payouts")], [os.path.join(go, "probe")]),
        "node": (["node", os.path.join(CLIENTS, "node", "examples", "payouts.js")],
                 ["node", node_probe]),
    }


# ---- the tests ----------------------------------------------------------------

def tests_for(lang, payouts, probe):
    fixed = payouts + ["--fixed"]

    def clean_run_hits():
        for cmd in (payouts, fixed):
            w = fresh_world()
            life = harness(cmd, w)
            assert life.returncode == 0 and life.hits == CLEAN, life
            assert life.stdout == "done\n", life
            assert judge(w) == {"duplicates": 0, "missing": 0}
            again = harness(cmd, w)  # a finished state: nothing to do
            assert again.returncode == 0 and again.hits == [], again
            assert judge(w) == {"duplicates": 0, "missing": 0}

    def buggy_crash_at_paid_2_pays_twice():
        w = fresh_world()
        life = harness(payouts, w, crash_at="paid#2")
        assert life.returncode == -9 and life.hits == CLEAN[:3], life
        assert ledger(w) == ["alice 10", "bob 20"]
        restart = harness(payouts, w)
        assert restart.returncode == 0 and restart.hits == ["paid#1", "mid-save#1", "paid#2",
                                                            "mid-save#2"], restart
        assert judge(w) == {"duplicates": 1, "missing": 0}, ledger(w)

    def fixed_crash_at_paid_2_pays_once():
        w = fresh_world()
        life = harness(fixed, w, crash_at="paid#2")
        assert life.returncode == -9 and life.hits == CLEAN[:3], life
        restart = harness(fixed, w)
        assert restart.returncode == 0 and restart.stdout == "done\n", restart
        assert judge(w) == {"duplicates": 0, "missing": 0}, ledger(w)
        assert ledger(w) == ["alice 10 key=alice-0", "bob 20 key=bob-1", "carol 30 key=carol-2"]

    def every_crash_of_a_clean_run():
        # what the real harness does: one scenario per hit, crash, restart
        for cmd, dups in ((payouts, True), (fixed, False)):
            for label in CLEAN:
                w = fresh_world()
                assert harness(cmd, w, crash_at=label).returncode == -9
                assert harness(cmd, w).returncode == 0
                assert judge(w) == {"duplicates": 1 if dups else 0, "missing": 0}, (cmd, label)

    def fixed_survives_two_crashes_in_a_row():
        # depth 2: crash the first life at each hit, then the restart at each of its hits
        for first in CLEAN:
            w = fresh_world()
            harness(fixed, w, crash_at=first)
            shutil.rmtree(w + "-probe", ignore_errors=True)
            shutil.copytree(w, w + "-probe")
            second_hits = harness(fixed, w + "-probe").hits
            for second in second_hits:
                w2 = fresh_world()
                assert harness(fixed, w2, crash_at=first).returncode == -9
                assert harness(fixed, w2, crash_at=second).returncode == -9
                assert harness(fixed, w2).returncode == 0
                assert judge(w2) == {"duplicates": 0, "missing": 0}, (first, second, ledger(w2))

    def a_non_blocking_descriptor_still_works():
        w = fresh_world()
        life = harness(payouts, w, nonblocking=True)
        assert life.returncode == 0 and life.hits == CLEAN, life

    def die_at_paid_2():
        w = fresh_world()
        life = plain(payouts, w, env={"CRASHSWEEP_DIE_AT": "paid#2"})
        assert life.returncode == -9, life
        assert "crashsweep: dying at paid#2\n" in life.stderr, life
        assert ledger(w) == ["alice 10", "bob 20"]

    def die_at_never_reached_is_said():
        # Python and Node say so at exit; Go and Rust have no exit hook.
        if lang not in ("python", "node"):
            return
        w = fresh_world()
        life = plain(payouts, w, env={"CRASHSWEEP_DIE_AT": "payd#2"})
        assert life.returncode == 0, life
        assert ("crashsweep: CRASHSWEEP_DIE_AT=payd#2: the program ended without reaching it; "
                "it passed mid-save (3), paid (3)\n") in life.stderr, life

    def die_at_is_ignored_under_a_harness():
        w = fresh_world()
        life = harness(payouts, w, env={"CRASHSWEEP_DIE_AT": "paid#2"})
        assert life.returncode == 0 and life.hits == CLEAN, life

    def die_at_malformed_exits_2():
        for value in ("paid", "paid#0", "paid#", "#1", "paid#x", "paid#+1", "paid# 1"):
            life = plain(probe + ["p:paid"], TMP, env={"CRASHSWEEP_DIE_AT": value})
            assert life.returncode == 2 and "CRASHSWEEP_DIE_AT" in life.stderr, (value, life)

    def die_at_splits_at_the_last_hash():
        life = plain(probe + ["p:a#b", "p:a", "p:a#b", "sh:echo unreachable"], TMP,
                     env={"CRASHSWEEP_DIE_AT": "a#b#2"})
        assert life.returncode == -9 and "dying at a#b#2" in life.stderr, life
        assert "unreachable" not in life.stdout

    def bad_protocol_exits_2():
        w = fresh_world()
        for protocol in ("4", None):
            life = harness(payouts, w, protocol=protocol)
            assert life.returncode == 2, life
            assert "this client speaks point protocol 1, the harness asked for" in life.stderr, life
        assert "4" in harness(payouts, w, protocol="4").stderr
        assert not os.path.exists(os.path.join(w, "state.json"))

    def harness_closing_its_end_exits_70():
        w = fresh_world()
        life = harness(payouts, w, close_at_first_hit=True)
        assert life.returncode == 70 and life.hits == ["paid#1"], life
        assert "paid" in life.stderr, life
        assert not os.path.exists(os.path.join(w, "state.json"))

    def wrong_answer_exits_70():
        life = harness(probe + ["p:x", "p:y"], TMP, answer=b"stop\n")
        assert life.returncode == 70 and life.hits == ["x#1"], life
        assert "x" in life.stderr and "stop" in life.stderr, life

    def bad_descriptor_exits_70():
        for fd in ("99", "-1", "x"):
            life = plain(probe + ["p:x"], TMP,
                         env={"CRASHSWEEP_FD": fd, "CRASHSWEEP_PROTOCOL": "1"})
            assert life.returncode == 70 and "CRASHSWEEP_FD" in life.stderr, (fd, life)

    def no_variables_runs_to_completion():
        for cmd in (payouts, fixed):
            w = fresh_world()
            life = plain(cmd, w)
            assert life.returncode == 0 and life.stdout == "done\n", life
            assert judge(w) == {"duplicates": 0, "missing": 0}

    def bad_names_refused_in_every_mode():
        names = ["bad:", "bad:aNLb", "bad:aCRb", "bad:ok"]
        for env in ({}, {"CRASHSWEEP_DIE_AT": "zz#1"}):
            life = plain(probe + names, TMP, env=env)
            assert life.returncode == 0, life
            assert life.stdout.split() == ["refused"] * 3 + ["accepted"], life
        life = harness(probe + names, TMP)
        assert life.returncode == 0 and life.hits == ["ok#1"], life
        assert life.stdout.split() == ["refused"] * 3 + ["accepted"], life

    def variables_removed_for_children():
        script = ('echo "fd=${CRASHSWEEP_FD-unset} protocol=${CRASHSWEEP_PROTOCOL-unset}"; '
                  'if [ "$(readlink /proc/$$/fd/{FD})" = "socket:[{INODE}]" ]; '
                  'then echo inherited; else echo closed; fi')
        life = harness(probe + ["p:first", "sh:" + script, "p:second"], TMP)
        assert life.returncode == 0 and life.hits == ["first#1", "second#1"], life
        # close-on-exec: the child does not hold the socket (Node cannot mark it,
        # but Node itself marks descriptors 0-15 close-on-exec at start-up)
        assert life.stdout == "fd=unset protocol=unset\nclosed\n", life

    tests = [clean_run_hits, buggy_crash_at_paid_2_pays_twice, fixed_crash_at_paid_2_pays_once,
             every_crash_of_a_clean_run, fixed_survives_two_crashes_in_a_row, a_non_blocking_descriptor_still_works, die_at_paid_2, die_at_never_reached_is_said, die_at_is_ignored_under_a_harness,
             die_at_malformed_exits_2, die_at_splits_at_the_last_hash, bad_protocol_exits_2,
             harness_closing_its_end_exits_70, wrong_answer_exits_70, bad_descriptor_exits_70,
             no_variables_runs_to_completion, bad_names_refused_in_every_mode,
             variables_removed_for_children]
    return [("%s: %s" % (lang, t.__name__), t) for t in tests]


THREADS_PROBE = r'''
import sys, threading
sys.path.insert(0, %r)
import crashsweep
def run(tag):
    for i in range(200):
        crashsweep.point("%%s-%%d-%%s" %% (tag, i, "x" * (i * 37 %% 300)))
threads = [threading.Thread(target=run, args=(t,)) for t in ("a", "b")]
for t in threads: t.start()
for t in threads: t.join()
''' % os.path.join(CLIENTS, "python")


def python_threads_are_serialised():
    probe = os.path.join(TMP, "threads.py")
    with open(probe, "w") as f:
        f.write(THREADS_PROBE)
    life = harness([sys.executable, probe], TMP)
    assert life.returncode == 0, life
    assert len(life.hits) == 400, life
    for tag in ("a", "b"):
        seq = [h for h in life.hits if h.startswith(tag + "-")]
        assert [int(h.split("-")[1]) for h in seq] == list(range(200)), seq[:5]
        for h in seq:
            m = re.fullmatch(r"[ab]-(\d+)-(x*)#1", h)
            assert m and len(m.group(2)) == int(m.group(1)) * 37 % 300, h


def node_worker_refused():
    worker = os.path.join(TMP, "worker.js")
    with open(worker, "w") as f:
        f.write("try { require(%s).point('w'); console.log('accepted'); }"
                " catch (e) { console.log('refused'); }\n"
                % json.dumps(os.path.join(CLIENTS, "node", "crashsweep.js")))
    code = "new (require('worker_threads').Worker)(%s);" % json.dumps(worker)
    for env in ({}, {"CRASHSWEEP_DIE_AT": "w#1"}):
        life = plain(["node", "-e", code], TMP, env=env)
        assert life.returncode == 0 and life.stdout == "refused\n", life


def minimal_client_of_the_protocol_page():
    page = os.path.join(CLIENTS, "..", "docs", "point-protocol.md")
    with open(page) as f:
        code = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    program = os.path.join(TMP, "minimal.py")
    with open(program, "w") as f:
        f.write(code + "\nimport sys\nfor name in sys.argv[1:]:\n    point(name)\nprint('done')\n")
    life = harness([sys.executable, program, "a", "b", "a"], TMP)
    assert life.returncode == 0 and life.hits == ["a#1", "b#1", "a#2"], life
    assert harness([sys.executable, program, "a", "b"], TMP, crash_at="b#1").returncode == -9
    assert harness([sys.executable, program, "a"], TMP, protocol="2").returncode == 2
    assert harness([sys.executable, program, "a"], TMP, close_at_first_hit=True).returncode == 70
    assert plain([sys.executable, program, "a"], TMP).stdout == "done\n"


# A seccomp-bpf program of one instruction, BPF_RET|BPF_K SECCOMP_RET_ALLOW:
# what a traced life (protocol 3) installs here, where no tracer runs.
ALLOW_ALL = (0x06).to_bytes(2, sys.byteorder) + b"\0\0" + (0x7FFF0000).to_bytes(4, sys.byteorder)


class ForkServer:
    """A reference harness for point protocol 2: the program runs to ready(),
    then each life() is a child it forks, given a world directory, streams
    and a point socket; the server reports each child's wait status. Under
    protocol 3 each request carries a filter, and the child waits for the
    answer ``seized`` (which a real harness writes once its tracer has seized
    the child) before it installs the filter."""

    def __init__(self, cmd, cwd, protocol="2"):
        self.protocol = protocol
        self.control, theirs = socket.socketpair()
        env = base_env(CRASHSWEEP_FD=str(theirs.fileno()), CRASHSWEEP_PROTOCOL=protocol)
        self.err = tempfile.TemporaryFile(dir=TMP)
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, pass_fds=[theirs.fileno()],
                                     stdout=subprocess.DEVNULL, stderr=self.err)
        theirs.close()
        self.control.settimeout(TIMEOUT)
        self.reader = self.control.makefile("rb")
        self.first = self.reader.readline()

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode()

    def life(self, world, crash_at=None, env=None, seized=b"seized\n"):
        parent, child = socket.socketpair()
        out = open(os.path.join(world, "..", os.path.basename(world) + ".out"), "w+b")
        env = base_env(**(env or {}))
        payload = world.encode() + b"".join(
            b"\0" + k.encode() + b"=" + v.encode() for k, v in env.items())
        if self.protocol == "3":
            request = b"fork %d %d\n" % (len(payload), len(ALLOW_ALL)) + payload + ALLOW_ALL
        else:
            request = b"fork %d\n" % len(payload) + payload
        with open(os.devnull, "rb") as null:
            socket.send_fds(self.control, [request],
                            [null.fileno(), out.fileno(), self.err.fileno(), child.fileno()])
        child.close()
        m = re.fullmatch(rb"pid ([0-9]+)\n", self.reader.readline())
        assert m, "no pid"
        pid = int(m.group(1))
        if self.protocol == "3":
            parent.sendall(seized)
        hits, counts = [], {}
        reader = parent.makefile("rb")
        parent.settimeout(TIMEOUT)
        while True:
            line = reader.readline()
            if not line:
                break
            name = re.fullmatch(rb"hit ([^\n\r]+)\n", line).group(1).decode()
            counts[name] = counts.get(name, 0) + 1
            hits.append("%s#%d" % (name, counts[name]))
            if hits[-1] == crash_at:
                os.kill(pid, signal.SIGKILL)
                break
            parent.sendall(b"go\n")
        reader.close()
        parent.close()
        m = re.fullmatch(rb"exit ([0-9]+) ([0-9]+)\n", self.reader.readline())
        assert m and int(m.group(1)) == pid, "no exit line for %d" % pid
        status = int(m.group(2))
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        out.seek(0)
        return Life(hits, code, out.read().decode(), "")

    def close(self):
        self.reader.close()
        self.control.close()
        return self.proc.wait(timeout=TIMEOUT)


PY_READY_PROBE = r'''
import os, sys, threading, time
sys.path.insert(0, %r)
import crashsweep
if "thread" in sys.argv:
    threading.Thread(target=time.sleep, args=(30,), name="poller", daemon=True).start()
if "point" in sys.argv:
    crashsweep.point("early")
crashsweep.ready()
crashsweep.ready()  # a second call does nothing
print("cwd=%%s var=%%s" %% (os.path.basename(os.getcwd()), os.environ.get("LIFE_VAR")))
crashsweep.point("late")
''' % os.path.join(CLIENTS, "python")


def python_fork_server():
    payouts = [sys.executable, os.path.join(CLIENTS, "python", "examples", "payouts.py")]
    server = ForkServer(payouts, fresh_world())
    try:
        assert server.first == b"ready\n", (server.first, server.stderr())
        w = fresh_world()
        life = server.life(w, crash_at="paid#2")
        assert life.returncode == -9 and life.hits == CLEAN[:3], life
        restart = server.life(w)
        assert restart.returncode == 0 and restart.stdout == "done\n", restart
        assert restart.hits == ["paid#1", "mid-save#1", "paid#2", "mid-save#2"], restart
        assert judge(w) == {"duplicates": 1, "missing": 0}, ledger(w)
        clean = fresh_world()
        assert server.life(clean).hits == CLEAN
        assert judge(clean) == {"duplicates": 0, "missing": 0}
    finally:
        assert server.close() == 0, server.stderr()


def python_fork_server_child_gets_its_world_and_env():
    probe = os.path.join(TMP, "ready_probe.py")
    with open(probe, "w") as f:
        f.write(PY_READY_PROBE)
    server = ForkServer([sys.executable, probe], TMP)
    try:
        assert server.first == b"ready\n", server.stderr()
        w = fresh_world()
        life = server.life(w, env={"LIFE_VAR": "seven"})
        assert life.returncode == 0 and life.hits == ["late#1"], life
        assert life.stdout == "cwd=%s var=seven\n" % os.path.basename(w), life
    finally:
        server.close()
    # without a harness, and under protocol 1, ready() does nothing
    assert plain([sys.executable, probe], TMP).returncode == 0
    life = harness([sys.executable, probe], TMP)
    assert life.returncode == 0 and life.hits == ["late#1"], life


def python_fork_server_refusals():
    probe = os.path.join(TMP, "ready_probe.py")
    with open(probe, "w") as f:
        f.write(PY_READY_PROBE)
    server = ForkServer([sys.executable, probe, "thread"], TMP)
    assert server.first == b"" and server.close() == 2, server.stderr()
    assert "poller" in server.stderr() and "start threads after ready()" in server.stderr()
    server = ForkServer([sys.executable, probe, "point"], TMP)
    assert server.first == b"" and server.close() == 2, server.stderr()
    assert "'early' was passed before crashsweep.ready()" in server.stderr(), server.stderr()


def python_traced_fork_server():
    """Protocol 3: each child waits for ``seized``, installs the request's
    filter, then runs as a life; any other answer exits 70 before a hit."""
    payouts = [sys.executable, os.path.join(CLIENTS, "python", "examples", "payouts.py")]
    server = ForkServer(payouts, fresh_world(), protocol="3")
    try:
        assert server.first == b"ready\n", (server.first, server.stderr())
        w = fresh_world()
        life = server.life(w)
        assert life.returncode == 0 and life.hits == CLEAN, (life, server.stderr())
        assert judge(w) == {"duplicates": 0, "missing": 0}, ledger(w)
        w = fresh_world()
        refused = server.life(w, seized=b"go\n")
        assert refused.returncode == 70 and refused.hits == [], refused
        assert "instead of `seized`" in server.stderr(), server.stderr()
        assert not os.path.exists(os.path.join(w, "ledger.txt"))
    finally:
        assert server.close() == 0, server.stderr()


def main():
    tests = [("python: threads are serialised", python_threads_are_serialised),
             ("python: a fork server", python_fork_server),
             ("python: a forked life's world and environment",
              python_fork_server_child_gets_its_world_and_env),
             ("python: a fork server's refusals", python_fork_server_refusals),
             ("python: a traced fork server (protocol 3)", python_traced_fork_server),
             ("docs: the minimal client", minimal_client_of_the_protocol_page),
             ("node: worker threads refused", node_worker_refused)]
    try:
        for lang, (payouts, probe) in languages().items():
            tests += tests_for(lang, payouts, probe)
    except Exception:
        traceback.print_exc()
        print("0 passed, 1 failed")
        return 1
    passed = failed = 0
    for name, test in tests:
        try:
            test()
            passed += 1
            print("ok   %s" % name)
        except Exception:
            failed += 1
            print("FAIL %s" % name)
            traceback.print_exc()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        status = main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(status)
