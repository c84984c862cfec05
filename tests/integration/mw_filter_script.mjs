// A filter program for the "filter" middleware tests (mw_filter.test.mjs):
// reads one JSON line per message on stdin, answers one JSON line on stdout.
//
// Decisions, by the tool name of a tools/call (or by method):
//   deny_me          drop, with a reason
//   rewrite_me       pass, with the arguments replaced by {rewritten: true}
//   answer_me        reply with a result of its own
//   bad_answer       answer with an action that does not exist
//   hang_me          never answer
//   die_me           exit with status 7 without answering
//   notifications/roots/list_changed   drop
//   a response to a call of "echo" with arguments {redactMe: ...}: the
//   response is replaced by a text result "redacted by filter"
//   anything else    pass unchanged
// Answers go out in reverse order of two lines when the tool is "pair_*",
// to show that ids, not order, match answers to messages.
// With a file name as the first argument, every line received is appended
// there (for assertions on direction and context).

import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const logFile = process.argv[2];
const held = [];

const out = (x) => process.stdout.write(`${JSON.stringify(x)}\n`);

function decide(line) {
  const { id, kind, message } = line;
  const name = message?.params?.name;
  if (kind === 'response') {
    const redact = message?.result?.structuredContent?.params?.arguments?.redactMe;
    if (redact !== undefined) {
      return { id, action: 'pass', message: { result: { content: [{ type: 'text', text: 'redacted by filter' }] } } };
    }
    return { id, action: 'pass' };
  }
  if (message.method === 'notifications/roots/list_changed') return { id, action: 'drop' };
  switch (name) {
    case 'deny_me': return { id, action: 'drop', reason: 'deny_me is not allowed here' };
    case 'rewrite_me':
      return { id, action: 'pass', message: { ...message, params: { ...message.params, name: 'echo', arguments: { rewritten: true } } } };
    case 'answer_me': return { id, action: 'reply', result: { content: [{ type: 'text', text: 'answered by filter' }] } };
    case 'bad_answer': return { id, action: 'explode' };
    case 'hang_me': return null;
    case 'die_me': process.exit(7);
    default: return { id, action: 'pass' };
  }
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (text) => {
  const line = JSON.parse(text);
  if (logFile) appendFileSync(logFile, `${text}\n`);
  const answer = decide(line);
  if (!answer) return;
  if (String(line.message?.params?.name ?? '').startsWith('pair_')) {
    held.push(answer);
    if (held.length === 2) { out(held[1]); out(held[0]); held.length = 0; }
    return;
  }
  out(answer);
});
rl.on('close', () => process.exit(0));
