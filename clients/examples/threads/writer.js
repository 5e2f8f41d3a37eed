'use strict';
/**
 * Pays alice 10, bob 20 and carol 30 from the current directory, with its
 * progress saved in the background while it pays on. Every file call is
 * asynchronous: Node runs it on a thread of libuv's pool, so the payments'
 * calls and the saves' calls come from several threads and interleave
 * differently from run to run. Swept unchanged with `crashsweep --io-points`.
 *
 *     node writer.js           # the buggy version: a crash can pay twice
 *     node writer.js --fixed   # the fixed version: payments carry a key
 *     node writer.js --payees=1  # alice alone (a shorter run)
 *
 * Each payment appends one line "payee amount" to ledger.txt and syncs it;
 * then the new progress is queued for saving, crash-safely (temp file,
 * fsync, rename, fsync of the directory), and the next payment starts
 * without waiting for the save. A restart resumes from state.json: the
 * buggy version pays again every payee whose progress was not saved yet;
 * the fixed version writes "payee amount key=<payee>-<index>" and does not
 * pay a key the ledger already has.
 */

const fs = require('fs/promises');

const ALL = [['alice', 10], ['bob', 20], ['carol', 30]];
const count = process.argv.find((a) => a.startsWith('--payees='));
const PAYEES = count ? ALL.slice(0, Number(count.slice('--payees='.length))) : ALL;

async function load() {
  try {
    return JSON.parse(await fs.readFile('state.json', 'utf8')).next;
  } catch (e) {
    if (e.code === 'ENOENT') return 0;
    throw e;
  }
}

async function save(next) {
  const f = await fs.open('state.json.tmp', 'w');
  await f.write(JSON.stringify({ next }));
  await f.sync();
  await f.close();
  await fs.rename('state.json.tmp', 'state.json');
  const d = await fs.open('.', 'r');
  await d.sync();
  await d.close();
}

async function alreadyPaid(key) {
  let text;
  try {
    text = await fs.readFile('ledger.txt', 'utf8');
  } catch (e) {
    if (e.code === 'ENOENT') return false;
    throw e;
  }
  return text.split('\n').some((line) => line.split(/\s+/).includes(`key=${key}`));
}

async function pay(line) {
  const f = await fs.open('ledger.txt', 'a');
  await f.write(`${line}\n`);
  await f.sync();
  await f.close();
}

async function main() {
  const fixed = process.argv.slice(2).includes('--fixed');
  // The saves, one after another, behind the payments.
  let saved = Promise.resolve();
  for (let i = await load(); i < PAYEES.length;) {
    const [payee, amount] = PAYEES[i];
    if (!fixed) {
      await pay(`${payee} ${amount}`);
    } else {
      const key = `${payee}-${i}`;
      if (!(await alreadyPaid(key))) await pay(`${payee} ${amount} key=${key}`);
    }
    i += 1;
    const next = i;
    saved = saved.then(() => save(next));
  }
  await saved;
  console.log('done');
}

main().catch((e) => {
  console.error('writer:', e);
  process.exit(1);
});
