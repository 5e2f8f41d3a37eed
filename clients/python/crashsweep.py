"""Crash points for Python programs: the crashsweep point protocol, version 1.

Mark each place a crash may land with ``crashsweep.point("mid-save")``.

- Run by the crashsweep harness (``CRASHSWEEP_FD`` and ``CRASHSWEEP_PROTOCOL=1``
  set), a point writes ``hit <name>\\n`` to the inherited descriptor and blocks
  until the harness answers ``go\\n``. To crash the program there, the harness
  never answers: it kills the process with SIGKILL.
- Run by hand with ``CRASHSWEEP_DIE_AT=name#n``, the program kills itself with
  SIGKILL at the n-th pass over ``name``.
- With neither set, a point does nothing.

Points on every thread count; one lock serialises them. A name must be a
non-empty string without newline or carriage return, or ``ValueError`` is
raised in every mode. The protocol is described in docs/point-protocol.md.
"""

import os
import re
import signal
import sys
import threading

__all__ = ["point"]

PROTOCOL = "1"

_lock = threading.Lock()
_mode = None  # None until the first point; then "off", "harness" or "die-at"
_fd = -1
_die_at = None  # (name, n) in die-at mode
_passes = {}  # passes per name, counted in die-at mode only


def _fail(status, message):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os.write(2, ("crashsweep: " + message + "\n").encode("utf-8", "replace"))
    os._exit(status)


def _setup():
    global _mode, _fd, _die_at
    fd = os.environ.pop("CRASHSWEEP_FD", None)
    protocol = os.environ.pop("CRASHSWEEP_PROTOCOL", None)
    if fd is not None:
        if protocol != PROTOCOL:
            asked = "no protocol (CRASHSWEEP_PROTOCOL unset)" if protocol is None else '"%s"' % protocol
            _fail(2, "this client speaks point protocol 1, the harness asked for %s" % asked)
        try:
            if not re.fullmatch(r"[0-9]+", fd):
                raise ValueError("not a descriptor number")
            _fd = int(fd)
            os.set_inheritable(_fd, False)  # also fails on a descriptor that is not open
            os.set_blocking(_fd, True)  # the protocol's descriptor is blocking: make sure
        except (ValueError, OSError) as e:
            _fail(70, "CRASHSWEEP_FD=%r is not a usable descriptor: %s" % (fd, e))
        _mode = "harness"
        return
    die_at = os.environ.get("CRASHSWEEP_DIE_AT")
    if die_at is not None:
        name, sep, n = die_at.rpartition("#")
        if not sep or not _valid(name) or not re.fullmatch(r"[0-9]+", n) or int(n) < 1:
            _fail(2, "CRASHSWEEP_DIE_AT=%r is not name#n with a point name and n >= 1" % die_at)
        _die_at = (name, int(n))
        _mode = "die-at"
        return
    _mode = "off"


def _valid(name):
    return isinstance(name, str) and name != "" and "\n" not in name and "\r" not in name


def _report(name):
    line = ("hit " + name + "\n").encode("utf-8")
    try:
        while line:
            line = line[os.write(_fd, line):]
        answer = b""
        while not answer.endswith(b"\n") and len(answer) < 16:
            byte = os.read(_fd, 1)
            if not byte:
                _fail(70, "point %r: the harness closed the descriptor (end of file)" % name)
            answer += byte
    except OSError as e:
        _fail(70, "point %r: cannot talk to the harness on descriptor %d: %s" % (name, _fd, e))
    if answer != b"go\n":
        _fail(70, "point %r: the harness answered %r, not 'go'" % (name, answer))


def point(name):
    """Pass the crash point ``name``: report it to the harness and wait for
    its answer, die here if CRASHSWEEP_DIE_AT names this pass, else nothing."""
    if not _valid(name):
        raise ValueError("crashsweep: a point name must be a non-empty string "
                         "without newline or carriage return, not %r" % (name,))
    if _mode == "off":
        return
    with _lock:
        if _mode is None:
            _setup()
        if _mode == "harness":
            _report(name)
        elif _mode == "die-at":
            n = _passes.get(name, 0) + 1
            _passes[name] = n
            if (name, n) == _die_at:
                os.write(2, ("crashsweep: dying at %s#%d\n" % (name, n)).encode("utf-8", "replace"))
                os.kill(os.getpid(), signal.SIGKILL)
                _fail(70, "SIGKILL at %s#%d did not kill the process" % (name, n))
