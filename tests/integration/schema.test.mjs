// The configuration's JSON Schema (docs/mcp-chain.schema.json) kept true:
// `mcp-chain schema` prints exactly that file; it compiles under ajv in
// strict mode; every example in config/ and every file of
// tests/fixtures/config-good passes both the schema and `mcp-chain check`;
// every file of tests/fixtures/config-bad is refused by both, at the same
// JSON pointer where the two can name one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import Ajv2020 from 'ajv/dist/2020.js';

import { CHAIN, ROOT, SKIP_NO_CHAIN, TEST_TIMEOUT, tmpPath } from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_CHAIN };
const SCHEMA_FILE = path.join(ROOT, 'docs', 'mcp-chain.schema.json');
const SCHEMA = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8'));
const BAD = path.join(ROOT, 'tests', 'fixtures', 'config-bad');
const GOOD = path.join(ROOT, 'tests', 'fixtures', 'config-good');
const EXAMPLES = path.join(ROOT, 'config');

/** The JSON files of DIR, full paths, sorted. */
const jsonFiles = (dir) => readdirSync(dir).filter((f) => f.endsWith('.json')).sort()
  .map((f) => path.join(dir, f));

/** The key files the examples and fixtures name, made once, and the environment naming them. */
function keyEnv() {
  const cluster = tmpPath(`schema-cluster-${process.pid}.keys`);
  const token = tmpPath(`schema-token-${process.pid}.key`);
  writeFileSync(cluster, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  writeFileSync(token, randomBytes(32), { mode: 0o600 });
  return {
    MCP_CHAIN_INSTANCE: 'a1', MCP_CHAIN_CLUSTER_KEYS: cluster, MCP_CHAIN_TOKEN_KEY: token,
    KEYS: cluster, HOME: process.env.HOME ?? '/tmp',
  };
}
const ENV = keyEnv();

const SANITIZER_REPORT = /ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;

/** `mcp-chain check FILE`: {code, stderr}. */
function check(file) {
  const r = spawnSync(CHAIN, ['check', file], {
    encoding: 'utf8', env: { ...process.env, ...ENV }, cwd: ROOT, timeout: TEST_TIMEOUT - 5000,
  });
  assert.doesNotMatch(r.stderr, SANITIZER_REPORT, r.stderr);
  return { code: r.status, stderr: r.stderr };
}

/** The compiled schema: strict mode, every error. */
function compile() {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  return ajv.compile(SCHEMA);
}

/** The pointer an ajv error is about: the member itself for a missing or unknown key. */
function pointerOf(e) {
  const esc = (k) => k.replace(/~/g, '~0').replace(/\//g, '~1');
  if (e.keyword === 'required') return `${e.instancePath}/${esc(e.params.missingProperty)}`;
  if (e.keyword === 'additionalProperties') return `${e.instancePath}/${esc(e.params.additionalProperty)}`;
  if (e.keyword === 'dependentRequired') return `${e.instancePath}/${esc(e.params.property)}`;
  return e.instancePath || '/';
}

/*
 * Each wrong file and where it is wrong: `at` for both, or `schema` and
 * `check` where they name different members (the schema names the missing
 * key, check the object that lacks it).
 */
const WRONG = {
  'top-key-typo': { at: '/separater', says: /unknown key \(did you mean "separator"\?\)/ },
  'server-key-typo': { at: '/mcpServers/fs/comand', says: /did you mean "command"/ },
  'args-not-array': { at: '/mcpServers/fs/args' },
  'timeout-string': { at: '/mcpServers/fs/timeout' },
  'max-message-too-small': { at: '/maxMessageBytes' },
  'listen-port-range': { at: '/listen/port' },
  'listen-ui-string': { at: '/listen/ui' },
  'listen-address-name': { at: '/listen/address' },
  'telemetry-no-endpoint': { at: '/telemetry/endpoint', says: /is required/ },
  'telemetry-sampling-2': { at: '/telemetry/sampling' },
  'telemetry-batch-zero': { at: '/telemetry/batchSize' },
  'telemetry-endpoint-scheme': { at: '/telemetry/endpoint' },
  'module-unknown': { at: '/middleware/0/use', says: /unknown module "polcy" \(did you mean "policy"\?/ },
  'module-unknown-option': { at: '/middleware/0/sinks', says: /unknown option/ },
  'policy-rule-empty': { at: '/middleware/0/rules/0' },
  'limit-rate-zero': { at: '/middleware/0/rules/0/rate' },
  'log-path-without-file': { at: '/middleware/0/path' },
  'log-facility-with-file': { at: '/middleware/0/facility' },
  'auth-bad-hash': { at: '/middleware/0/tokens/0/sha256' },
  'auth-require-no-scopes': { at: '/middleware/0/oauth/require/0/scopes' },
  'log-level-bad': { at: '/logLevel' },
  'redis-url-db-range': { at: '/redis/url' },
  'server-filter-timeout': { at: '/mcpServers/fs/middleware/0/timeoutMs' },
  'redis-url-shape': { at: '/redis/url' },
  'redis-url-and-host': { at: '/redis/host' },
  'servers-empty': { at: '/mcpServers' },
  'servers-all-disabled': { at: '/mcpServers' },
  'http-with-command': { at: '/mcpServers/api/command' },
  'stdio-missing-command': { schema: '/mcpServers/fs/command', check: '/mcpServers/fs' },
  'separator-bad': { at: '/separator' },
  'eras-bad': { at: '/eras' },
  'restart-max-too-big': { at: '/mcpServers/fs/restart/maxRestarts' },
  'sse-2026': { at: '/mcpServers/old/protocol' },
  'oauth-on-stdio': { at: '/mcpServers/fs/oauth' },
  'prefix-bad': { at: '/mcpServers/fs/prefix' },
  'schema-not-string': { at: '/$schema' },
  'cluster-no-keyfile': { at: '/cluster/keyFile' },
};

test('mcp-chain schema prints docs/mcp-chain.schema.json, byte for byte', T, () => {
  const r = spawnSync(CHAIN, ['schema'], { encoding: 'utf8', timeout: TEST_TIMEOUT - 5000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, readFileSync(SCHEMA_FILE, 'utf8'));
  assert.deepEqual(JSON.parse(r.stdout), SCHEMA);
  const help = spawnSync(CHAIN, ['--help'], { encoding: 'utf8' });
  assert.match(help.stdout, /mcp-chain schema/);
  const extra = spawnSync(CHAIN, ['schema', 'extra'], { encoding: 'utf8' });
  assert.equal(extra.status, 2);
  assert.match(extra.stderr, /usage: mcp-chain schema/);
});

test('the schema is draft 2020-12 and compiles under ajv in strict mode', () => {
  assert.equal(SCHEMA.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.equal(typeof compile(), 'function');
  // every section config.c knows is described
  for (const k of ['mcpServers', 'middleware', 'listen', 'redis', 'cluster', 'tokenStore',
    'telemetry', '$schema', 'maxMessageBytes', 'eras']) {
    assert.ok(SCHEMA.properties[k], k);
  }
  assert.deepEqual(SCHEMA.$defs.module.properties.use.enum.toSorted(),
    ['auth', 'filter', 'limit', 'log', 'policy', 'rewrite']);
});

test('every example in config/ names the schema and passes it and mcp-chain check', T, () => {
  const validate = compile();
  const files = jsonFiles(EXAMPLES);
  assert.ok(files.length >= 10);
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    const doc = JSON.parse(text);
    assert.equal(Object.keys(doc)[0], '$schema', `${f}: "$schema" is the first key`);
    assert.equal(doc.$schema, '../docs/mcp-chain.schema.json', f);
    assert.ok(validate(doc), `${f}: ${JSON.stringify(validate.errors)}`);
    const r = check(f);
    assert.equal(r.code, 0, `${f}: ${r.stderr}`);
  }
});

test('right but unusual files pass the schema and mcp-chain check', T, () => {
  const validate = compile();
  const files = jsonFiles(GOOD);
  assert.ok(files.length >= 5);
  for (const f of files) {
    assert.ok(validate(JSON.parse(readFileSync(f, 'utf8'))), `${f}: ${JSON.stringify(validate.errors)}`);
    const r = check(f);
    assert.equal(r.code, 0, `${f}: ${r.stderr}`);
  }
});

test('wrong files are refused by the schema and by mcp-chain check, at the same key', T, () => {
  const validate = compile();
  const files = jsonFiles(BAD);
  const names = files.map((f) => path.basename(f, '.json'));
  assert.ok(files.length >= 20);
  assert.deepEqual(names.toSorted(), Object.keys(WRONG).toSorted(), 'one entry per file');
  for (const f of files) {
    const want = WRONG[path.basename(f, '.json')];
    const schemaAt = want.schema ?? want.at, checkAt = want.check ?? want.at;
    assert.equal(validate(JSON.parse(readFileSync(f, 'utf8'))), false, `${f}: the schema accepts it`);
    const at = validate.errors.map(pointerOf);
    assert.ok(at.includes(schemaAt), `${f}: the schema's errors are at ${at.join(', ')}, not ${schemaAt}`);
    const r = check(f);
    assert.equal(r.code, 1, `${f}: check says ${r.stderr}`);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith(`${f}: `));
    assert.ok(lines.some((l) => l.startsWith(`${f}: ${checkAt}: `)),
      `${f}: check's errors are\n${r.stderr}\nnot at ${checkAt}`);
    if (want.says) assert.match(r.stderr, want.says, f);
  }
});

test('a syntax error is check\'s (file:line:column); the schema sees no document', T, () => {
  const f = tmpPath(`schema-syntax-${process.pid}.json`);
  writeFileSync(f, '{\n  "mcpServers": {,\n}\n');
  const r = check(f);
  assert.equal(r.code, 1);
  assert.match(r.stderr, new RegExp(`${f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2:\\d+: `));
});
