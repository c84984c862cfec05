#!/usr/bin/env node
// A transparent stdio relay for clients_compare.test.mjs:
//
//   node stdio_tee.mjs LOG COMMAND [ARGS...]
//
// runs COMMAND with its stdin and stdout piped through this process byte for
// byte, and appends one JSON line to LOG for each line that passes
// ({dir: "c2s"|"s2c", t, line}), plus {dir: "start"} and {dir: "exit"}.
// COMMAND's stderr is inherited. EOF on our stdin closes COMMAND's stdin;
// SIGTERM, SIGINT and SIGHUP are passed on to COMMAND; we exit when it does,
// with its status. So a client (Claude Code) sees COMMAND as if it had
// spawned it itself, and the test reads what the two said to each other.

import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';

const [log, cmd, ...args] = process.argv.slice(2);
if (!log || !cmd) {
  process.stderr.write('usage: stdio_tee.mjs LOG COMMAND [ARGS...]\n');
  process.exit(2);
}
const note = (o) => appendFileSync(log, `${JSON.stringify({ t: Date.now(), ...o })}\n`);

const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
note({ dir: 'start', pid: process.pid, child: child.pid, argv: [cmd, ...args] });

function tee(dir, src, dst) {
  let buf = Buffer.alloc(0);
  src.on('data', (chunk) => {
    dst.write(chunk);
    buf = Buffer.concat([buf, chunk]);
    let i;
    while ((i = buf.indexOf(0x0a)) >= 0) {
      note({ dir, line: buf.subarray(0, i).toString('utf8') });
      buf = buf.subarray(i + 1);
    }
  });
  src.on('end', () => { if (buf.length) note({ dir, line: buf.toString('utf8'), partial: true }); });
}

tee('c2s', process.stdin, child.stdin);
tee('s2c', child.stdout, process.stdout);
process.stdin.on('end', () => child.stdin.end());
child.stdin.on('error', () => {});
process.stdout.on('error', () => {});
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => {
    note({ dir: 'signal', sig });
    try { child.kill(sig); } catch { /* gone */ }
  });
}
child.on('error', (e) => { note({ dir: 'exit', error: String(e) }); process.exit(127); });
child.on('exit', (code, sig) => {
  note({ dir: 'exit', code, sig });
  process.exit(code ?? 128);
});
