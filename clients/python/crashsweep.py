"""Crash points for Python programs: the crashsweep point protocol, versions 1 to 3.

Mark each place a crash may land with ``crashsweep.point("mid-save")``.

- Run by the crashsweep harness (``CRASHSWEEP_FD`` and ``CRASHSWEEP_PROTOCOL=1``
  set), a point writes ``hit <name>\\n`` to the inherited descriptor and blocks
  until the harness answers ``go\\n``. To crash the program there, the harness
  never answers: it kills the process with SIGKILL.
- Run by hand with ``CRASHSWEEP_DIE_AT=name#n``, the program kills itself with
  SIGKILL at the n-th pass over ``name``. A program that ends without that
  pass (a mistyped name, a count too high) says so on standard error, with
  the points it passed.
- With neither set, a point does nothing.
- ``crashsweep.ready()`` marks the end of the program's set-up (imports,
  configuration). Under a harness that asked for a fork server
  (``CRASHSWEEP_PROTOCOL=2``), the program runs once to ``ready()``; then
  every life is a child forked there, which returns from ``ready()`` in its
  world directory. Anywhere else ``ready()`` does nothing. Call it on the
  only thread, before any point, before opening files of the world. Under
  ``CRASHSWEEP_PROTOCOL=3`` the harness traces each life: the child waits
  to be seized, then installs the seccomp filter the request carried.

Points on every thread count; one lock serialises them. A name must be a
non-empty string without newline or carriage return, or ``ValueError`` is
raised in every mode. The protocol is described in docs/point-protocol.md.
"""

import atexit
import gc
import os
import re
import select
import signal
import socket
import sys
import threading

__all__ = ["point", "ready"]

PROTOCOL = "1"
FORK_SERVER = "2"  # the protocol version that asks for a fork server
TRACED_FORK_SERVER = "3"  # a fork server whose lives the harness traces

_lock = threading.Lock()
_mode = None  # None until the first point; then "off", "harness" or "die-at"
_fd = -1
_die_at = None  # (name, n) in die-at mode
_passes = {}  # passes per name, counted in die-at mode only
_libc = None  # the C library, loaded by a traced fork server (protocol 3)


def _fail(status, message):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os.write(2, ("crashsweep: " + message + "\n").encode("utf-8", "replace"))
    os._exit(status)


def _setup(name):
    global _mode, _fd, _die_at
    fd = os.environ.pop("CRASHSWEEP_FD", None)
    protocol = os.environ.pop("CRASHSWEEP_PROTOCOL", None)
    if fd is not None and protocol in (FORK_SERVER, TRACED_FORK_SERVER):
        _fail(2, "point %r was passed before crashsweep.ready(): the harness started this "
                 "program as a fork server (point protocol %s), so call ready() once, "
                 "before any point" % (name, protocol))
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


def _die_at_missed():
    """At a normal exit in die-at mode: the kill never came, so say why."""
    if _mode == "harness":
        return
    passed = ", ".join("%s (%d)" % kv for kv in sorted(_passes.items())) or "no point"
    os.write(2, ("crashsweep: CRASHSWEEP_DIE_AT=%s: the program ended without reaching it; "
                 "it passed %s\n" % (os.environ.get("CRASHSWEEP_DIE_AT"), passed))
             .encode("utf-8", "replace"))


if "CRASHSWEEP_DIE_AT" in os.environ and "CRASHSWEEP_FD" not in os.environ:
    atexit.register(_die_at_missed)


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
            _setup(name)
        if _mode == "harness":
            _report(name)
        elif _mode == "die-at":
            n = _passes.get(name, 0) + 1
            _passes[name] = n
            if (name, n) == _die_at:
                os.write(2, ("crashsweep: dying at %s#%d\n" % (name, n)).encode("utf-8", "replace"))
                os.kill(os.getpid(), signal.SIGKILL)
                _fail(70, "SIGKILL at %s#%d did not kill the process" % (name, n))


def ready(exit_fast=False):
    """The end of the program's set-up. Under a harness that asked for a fork
    server, the program forks here once per life: each child returns from
    this call in its life's world directory, with its environment, standard
    streams and point descriptor. More than one thread alive here is refused
    (exit 2). Anywhere else (no harness, protocol 1, a second call) this does
    nothing.

    ``exit_fast=True``: forked lives end fast. The set-up's objects are
    frozen (``gc.freeze()``), and a child whose main module runs to its end
    skips Python's teardown, which in a forked child copies most of the
    server's memory (a LangGraph agent's life ended in 7 ms instead of 353).
    At exit it runs the atexit handlers registered after ``import
    crashsweep``, flushes every open file object and exits 0. Finalizers
    (``__del__``, a database connection left open) do not run, so close what
    you open (``with``); the harness's check refuses a program whose forked
    life then leaves another world. An exception or ``sys.exit()`` exits as
    Python does."""
    global _mode
    with _lock:
        if _mode is not None:
            return
        protocol = os.environ.get("CRASHSWEEP_PROTOCOL")
        if protocol not in (FORK_SERVER, TRACED_FORK_SERVER) or "CRASHSWEEP_FD" not in os.environ:
            return
        fd = os.environ.pop("CRASHSWEEP_FD")
        os.environ.pop("CRASHSWEEP_PROTOCOL")
        _mode = "server"
    _alone()
    try:
        if not re.fullmatch(r"[0-9]+", fd):
            raise ValueError("not a descriptor number")
        control = socket.socket(fileno=int(fd))
        control.set_inheritable(False)
        control.setblocking(True)
    except (ValueError, OSError) as e:
        _fail(70, "CRASHSWEEP_FD=%r is not the fork server's socket: %s" % (fd, e))
    if exit_fast:
        import dis
        import io

        global _fast_exit_setup
        returns = {dis.opmap[n] for n in ("RETURN_VALUE", "RETURN_CONST") if n in dis.opmap}
        # Files opened during set-up: frozen below, so not found at exit.
        files = [o for o in gc.get_objects() if isinstance(o, io.IOBase)]
        _fast_exit_setup = (returns, files)
    _serve(control, protocol == TRACED_FORK_SERVER)


_fast_exit_setup = None  # (return opcodes, set-up's files) with ready(exit_fast=True)
_fast_exit = None  # in such a forked child: the main module's frame


def _arm_fast_exit():
    """In a forked child of ``ready(exit_fast=True)``: find the main
    module's frame, whose last instruction tells at exit how it ended."""
    global _fast_exit
    main = sys.modules.get("__main__")
    frame = sys._getframe()
    while frame is not None and not (
            frame.f_code.co_name == "<module>" and main is not None
            and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is not None:
        _fast_exit = frame


def _exit_fast():
    """At exit (atexit, registered at import: after the handlers the life
    registered): if the main module returned, flush every file object and
    exit 0 without Python's teardown. Anything else returns, and Python
    exits as it would."""
    import io

    frame, (returns, files) = _fast_exit, _fast_exit_setup
    code, at = frame.f_code.co_code, frame.f_lasti
    if not (0 <= at < len(code) and code[at] in returns):
        return  # an exception or SystemExit: its status is Python's to give
    try:
        for f in files + [o for o in gc.get_objects() if isinstance(o, io.IOBase)]:
            if not f.closed and f.writable():
                f.flush()
        for f in (sys.stdout, sys.stderr):
            if f is not None and not f.closed:
                f.flush()
    except Exception:
        return  # a flush failed: Python's own exit reports it
    os._exit(0)


def _at_exit():
    if _fast_exit is not None:
        _exit_fast()


atexit.register(_at_exit)


def _alone():
    """Refuse (exit 2) unless this is the only thread of the process."""
    names = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    others = []
    try:
        me = str(threading.get_native_id())
        for tid in sorted(os.listdir("/proc/self/task"), key=int):
            if tid != me:
                try:
                    with open("/proc/self/task/%s/comm" % tid) as f:
                        others.append("%s (task %s)" % (f.read().strip(), tid))
                except OSError:
                    others.append("task %s" % tid)
    except OSError:
        pass
    if threading.current_thread() is not threading.main_thread():
        _fail(2, "ready() was called on thread %r, not the main thread"
              % threading.current_thread().name)
    if names or others:
        # The same thread may be seen twice: by threading and as a task.
        seen = []
        if names:
            seen.append("threading's: " + ", ".join(names))
        if others:
            seen.append("the kernel's tasks: " + ", ".join(others))
        _fail(2, "ready(): %d other thread(s) are alive (%s); a fork server forks one "
                 "thread only, so start threads after ready()"
              % (max(len(names), len(others)), "; ".join(seen)))


def _serve(control, traced):
    """The fork server's loop: fork a child per request, report each child's
    end. Returns in a child only. ``traced`` (protocol 3): each request
    carries the seccomp filter its child installs once seized."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if traced:
        import ctypes  # here, once: not in every life

        global _libc
        _libc = ctypes.CDLL(None, use_errno=True)
    if _fast_exit_setup is not None:
        # Every object made so far moves to the collector's permanent
        # generation: a child's collections and its exit then do not touch
        # them, so their pages stay shared with this process instead of
        # being copied (a LangGraph agent's forked life ended in 61 ms
        # instead of 353 ms). Python's documentation of gc.freeze()
        # recommends it before fork() without exec(). Their finalizers may
        # then not run at exit, which exit_fast skips anyway.
        gc.freeze()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    control.sendall(b"ready\n")
    while True:
        while True:  # report every child that ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _send(control, b"exit %d %d\n" % (pid, status))
        try:
            readable, _, _ = select.select([control, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        if control not in readable:
            continue
        request = _request(control, traced)
        if request is None:
            os._exit(0)  # the harness closed its end: the sweep is over
        fds, payload, bpf = request
        try:
            pid = os.fork()
        except OSError as e:
            for fd in fds:
                os.close(fd)
            _send(control, b"error fork: %s\n" % str(e).encode("utf-8", "replace"))
            continue
        if pid == 0:
            _child(control, wake_r, wake_w, fds, payload)
            if traced:
                _seized_then_filtered(bpf)
            if _fast_exit_setup is not None:
                _arm_fast_exit()
            return
        for fd in fds:
            os.close(fd)
        _send(control, b"pid %d\n" % pid)


def _send(control, line):
    try:
        control.sendall(line)
    except OSError:
        os._exit(0)  # the harness is gone


def _request(control, traced):
    """One fork request, ``fork <n>\\n`` and n bytes, with 4 descriptors
    (``fork <n> <m>\\n`` and n + m bytes when ``traced``): (fds, payload,
    filter), or None at end of file."""
    data, fds, _, _ = socket.recv_fds(control, 1 << 16, 4)
    if not data:
        return None
    while b"\n" not in data:
        more = control.recv(1 << 16)
        if not more:
            return None
        data += more
    header, _, payload = data.partition(b"\n")
    m = re.fullmatch(rb"fork ([0-9]+) ([0-9]+)" if traced else rb"fork ([0-9]+)", header)
    if not m or len(fds) != 4:
        _fail(70, "the fork server got %r with %d descriptors, not a fork request"
              % (header[:80], len(fds)))
    n = int(m.group(1))
    total = n + (int(m.group(2)) if traced else 0)
    while len(payload) < total:
        more = control.recv(total - len(payload))
        if not more:
            return None
        payload += more
    return fds, payload[:n], payload[n:]


def _child(control, wake_r, wake_w, fds, payload):
    """Become the life: its streams, directory, environment and point
    descriptor."""
    global _mode, _fd
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.close(wake_r)
    os.close(wake_w)
    control.close()
    for i in range(3):
        os.dup2(fds[i], i)
        os.close(fds[i])
    fields = payload.split(b"\0")
    os.chdir(fields[0])
    os.environb.clear()
    for field in fields[1:]:
        key, sep, value = field.partition(b"=")
        if sep and key:
            os.environb[key] = value
    _fd = fds[3]
    os.set_inheritable(_fd, False)
    os.set_blocking(_fd, True)
    _mode = "harness"


def _seized_then_filtered(bpf):
    """In a traced child (protocol 3): wait for ``seized`` on the point
    descriptor (the harness's tracer has seized this process), then install
    the seccomp filter ``bpf``, so that every call it stops at has a tracer.
    Anything else exits with status 70."""
    answer = b""
    while not answer.endswith(b"\n") and len(answer) < 16:
        try:
            byte = os.read(_fd, 1)
        except OSError:
            byte = b""
        if not byte:
            break
        answer += byte
    if answer != b"seized\n":
        _fail(70, "a traced life got %r instead of `seized` from its harness" % (answer,))
    try:
        _install_filter(bpf)
    except (OSError, ValueError) as e:
        _fail(70, "a traced life could not install its seccomp filter: %s" % (e,))


def _install_filter(bpf):
    """``PR_SET_NO_NEW_PRIVS``, then the seccomp-bpf program ``bpf`` (its
    instructions as the kernel lays them out, 8 bytes each). x86_64 Linux:
    the only place the harness traces."""
    import ctypes

    if not bpf or len(bpf) % 8 or len(bpf) // 8 > 0xFFFF:
        raise ValueError("%d bytes is no filter (8 bytes an instruction)" % len(bpf))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = _libc or ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, sys_seccomp, seccomp_set_mode_filter = 38, 317, 1
    long = ctypes.c_long
    if libc.prctl(ctypes.c_int(pr_set_no_new_privs), long(1), long(0), long(0), long(0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS): " + os.strerror(ctypes.get_errno()))
    code = ctypes.create_string_buffer(bytes(bpf), len(bpf))
    prog = SockFprog(len(bpf) // 8, ctypes.addressof(code))
    rc = libc.syscall(long(sys_seccomp), long(seccomp_set_mode_filter), long(0),
                      ctypes.c_void_p(ctypes.addressof(prog)))
    if rc != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER): " + os.strerror(ctypes.get_errno()))
