'use strict';
/**
 * Crash points for Node programs: the crashsweep point protocol, version 1.
 *
 *     const { point } = require('./crashsweep');
 *     point('mid-save');
 *
 * - Run by the crashsweep harness (CRASHSWEEP_FD and CRASHSWEEP_PROTOCOL=1
 *   set), a point writes "hit <name>\n" to the inherited descriptor and blocks
 *   (synchronously: the event loop stops too) until the harness answers
 *   "go\n". To crash the program there, the harness never answers: it kills
 *   the process with SIGKILL.
 * - Run by hand with CRASHSWEEP_DIE_AT=name#n, the program kills itself with
 *   SIGKILL at the n-th pass over name.
 * - With neither set, a point does nothing.
 *
 * A name must be a non-empty string without newline or carriage return, or
 * point throws, in every mode. Points in worker threads are not supported:
 * point throws there, in every mode (each worker has its own copy of this
 * module, so its hits could not be serialised with the main thread's).
 * Node has no call to mark a descriptor close-on-exec; Node itself marks the
 * descriptors it inherits close-on-exec at start-up (0 to 15 always, higher
 * ones only up to the first unused number), so a harness passes the
 * descriptor as a low number. Either way the variables that name it are
 * removed from the environment at the first point.
 * The protocol is described in docs/point-protocol.md.
 */

const fs = require('fs');
const { isMainThread } = require('worker_threads');

const PROTOCOL = '1';

let mode = null; // null until the first point; then 'off', 'harness' or 'die-at'
let fd = -1;
let dieAt = null; // [name, n] in die-at mode
const passes = new Map(); // passes per name, counted in die-at mode only

// At a normal exit in die-at mode the kill never came (a mistyped name, a
// count too high): say so, with the points passed.
if (process.env.CRASHSWEEP_DIE_AT !== undefined && process.env.CRASHSWEEP_FD === undefined
    && isMainThread) {
  process.on('exit', () => {
    if (mode === 'harness') return;
    const passed = [...passes.entries()].sort().map(([k, v]) => `${k} (${v})`).join(', ') || 'no point';
    fs.writeSync(2, `crashsweep: CRASHSWEEP_DIE_AT=${process.env.CRASHSWEEP_DIE_AT}: `
      + `the program ended without reaching it; it passed ${passed}\n`);
  });
}

function fail(status, message) {
  try {
    fs.writeSync(2, `crashsweep: ${message}\n`);
  } catch (_) {
    // nothing left to tell it with
  }
  process.exit(status);
}

function valid(name) {
  return typeof name === 'string' && name !== '' && !/[\n\r]/.test(name);
}

function setup() {
  const fdText = process.env.CRASHSWEEP_FD;
  const protocol = process.env.CRASHSWEEP_PROTOCOL;
  delete process.env.CRASHSWEEP_FD;
  delete process.env.CRASHSWEEP_PROTOCOL;
  if (fdText !== undefined) {
    if (protocol !== PROTOCOL) {
      const asked = protocol === undefined
        ? 'no protocol (CRASHSWEEP_PROTOCOL unset)'
        : JSON.stringify(protocol);
      fail(2, `this client speaks point protocol 1, the harness asked for ${asked}`);
    }
    if (!/^[0-9]+$/.test(fdText)) {
      fail(70, `CRASHSWEEP_FD=${JSON.stringify(fdText)} is not a descriptor number`);
    }
    fd = Number(fdText);
    try {
      fs.fstatSync(fd);
    } catch (e) {
      fail(70, `CRASHSWEEP_FD=${JSON.stringify(fdText)} is not a usable descriptor: ${e.message}`);
    }
    mode = 'harness';
    return;
  }
  const value = process.env.CRASHSWEEP_DIE_AT;
  if (value !== undefined) {
    const i = value.lastIndexOf('#');
    const name = value.slice(0, i);
    const n = value.slice(i + 1);
    if (i < 0 || !valid(name) || !/^[0-9]+$/.test(n) || Number(n) < 1) {
      fail(2, `CRASHSWEEP_DIE_AT=${JSON.stringify(value)} is not name#n with a point name and n >= 1`);
    }
    dieAt = [name, Number(n)];
    mode = 'die-at';
    return;
  }
  mode = 'off';
}

// A blocking descriptor is what the protocol gives; should it be non-blocking
// anyway, wait a millisecond and try again rather than fail.
function retrying(op) {
  for (;;) {
    try {
      return op();
    } catch (e) {
      if (e.code !== 'EAGAIN' && e.code !== 'EINTR') throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
}

function report(name) {
  const what = JSON.stringify(name);
  try {
    const line = Buffer.from(`hit ${name}\n`, 'utf8');
    let sent = 0;
    while (sent < line.length) {
      sent += retrying(() => fs.writeSync(fd, line, sent, line.length - sent));
    }
    const answer = Buffer.alloc(16);
    let got = 0;
    while (got < answer.length && (got === 0 || answer[got - 1] !== 0x0a)) {
      const n = retrying(() => fs.readSync(fd, answer, got, 1, null));
      if (n === 0) fail(70, `point ${what}: the harness closed the descriptor (end of file)`);
      got += n;
    }
    const text = answer.toString('utf8', 0, got);
    if (text !== 'go\n') fail(70, `point ${what}: the harness answered ${JSON.stringify(text)}, not "go"`);
  } catch (e) {
    fail(70, `point ${what}: cannot talk to the harness on descriptor ${fd}: ${e.message}`);
  }
}

/**
 * Pass the crash point `name`: report it to the harness and wait for its
 * answer, die here if CRASHSWEEP_DIE_AT names this pass, else nothing.
 */
function point(name) {
  if (!valid(name)) {
    throw new TypeError(
      `crashsweep: a point name must be a non-empty string without newline or carriage return, not ${JSON.stringify(name)}`);
  }
  if (mode === 'off') return;
  if (!isMainThread) {
    throw new Error('crashsweep: points in worker threads are not supported by the Node client');
  }
  if (mode === null) setup();
  if (mode === 'harness') {
    report(name);
  } else if (mode === 'die-at') {
    const n = (passes.get(name) || 0) + 1;
    passes.set(name, n);
    if (name === dieAt[0] && n === dieAt[1]) {
      fs.writeSync(2, `crashsweep: dying at ${name}#${n}\n`);
      process.kill(process.pid, 'SIGKILL');
      fail(70, `SIGKILL at ${name}#${n} did not kill the process`);
    }
  }
}

module.exports = { point, PROTOCOL };
