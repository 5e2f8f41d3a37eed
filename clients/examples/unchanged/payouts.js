'use strict';
/**
 * Pays alice 10, bob 20 and carol 30 from the current directory, surviving
 * crashes: the Node payouts example with its crash points removed, swept
 * unchanged with `crashsweep --io-points`.
 *
 *     node payouts.js           # the buggy version: a crash can pay twice
 *     node payouts.js --fixed   # the fixed version: payments carry a key
 *
 * state.json ({"next": k}) is the durable progress, saved crash-safely (temp
 * file, fsync, rename, fsync of the directory). ledger.txt is the outside
 * world, a payment service: one line "payee amount" per payment. The buggy
 * version pays, then saves; a crash between the two repays on restart. The
 * fixed version writes "payee amount key=<payee>-<index>" and, like a service
 * that honours idempotency keys, does not pay a key the ledger already has.
 */

const fs = require('fs');

const PAYEES = [['alice', 10], ['bob', 20], ['carol', 30]];

function load() {
  try {
    return JSON.parse(fs.readFileSync('state.json', 'utf8')).next;
  } catch (e) {
    if (e.code === 'ENOENT') return 0;
    throw e;
  }
}

function save(next) {
  const f = fs.openSync('state.json.tmp', 'w');
  fs.writeSync(f, JSON.stringify({ next }));
  fs.fsyncSync(f);
  fs.closeSync(f);
  fs.renameSync('state.json.tmp', 'state.json');
  const d = fs.openSync('.', 'r');
  fs.fsyncSync(d);
  fs.closeSync(d);
}

function alreadyPaid(key) {
  let text;
  try {
    text = fs.readFileSync('ledger.txt', 'utf8');
  } catch (e) {
    if (e.code === 'ENOENT') return false;
    throw e;
  }
  return text.split('\n').some((line) => line.split(/\s+/).includes(`key=${key}`));
}

function pay(line) {
  const f = fs.openSync('ledger.txt', 'a');
  fs.writeSync(f, `${line}\n`);
  fs.fsyncSync(f);
  fs.closeSync(f);
}

function main() {
  const fixed = process.argv.slice(2).includes('--fixed');
  for (let i = load(); i < PAYEES.length;) {
    const [payee, amount] = PAYEES[i];
    if (!fixed) {
      pay(`${payee} ${amount}`);
    } else {
      const key = `${payee}-${i}`;
      if (!alreadyPaid(key)) pay(`${payee} ${amount} key=${key}`);
    }
    i += 1;
    save(i);
  }
  console.log('done');
}

main();
