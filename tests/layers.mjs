// layers.mjs - the layers of docs/architecture.md, checked on the built
// libraries: every symbol a layer's objects use from another layer's must
// come from a layer it may use. Run by meson (suite "unit") with one
// LAYER=ARCHIVE argument per static library; it reads their symbol tables
// with gcc-nm (nm where that is missing), so it sees calls and data
// references, not includes.
//
//   core        uses no other layer
//   middleware, front, external, aggregate   use the core alone
//   cli         the core alone (--record redacts with the core's redact.c)
//   app         all of them but cli (the wiring)
import { execFileSync } from 'node:child_process';

const ALLOWED = {
  core: [],
  middleware: ['core'],
  front: ['core'],
  external: ['core'],
  aggregate: ['core'],
  cli: ['core'],
  app: ['core', 'middleware', 'front', 'external', 'aggregate'],
};

function nm(archive) {
  for (const tool of ['gcc-nm', 'nm']) {
    try {
      return execFileSync(tool, ['-A', archive], { encoding: 'utf8', maxBuffer: 64 << 20 });
    } catch (e) {
      if (e.code !== 'ENOENT') throw e;
    }
  }
  throw new Error('neither gcc-nm nor nm is installed');
}

const defs = new Map();      // symbol -> { layer, file }
const uses = [];             // { layer, file, sym }
const members = {};          // layer -> object files seen
for (const arg of process.argv.slice(2)) {
  const [layer, archive] = arg.split('=');
  if (!ALLOWED[layer]) throw new Error(`unknown layer ${layer}`);
  members[layer] = new Set();
  for (const line of nm(archive).split('\n')) {
    const m = /^[^:]+:([^:]+):\s*(?:[0-9a-fA-F]+\s+)?([A-Za-z])\s+(\S+)$/.exec(line);
    if (!m) continue;
    const [, file, type, sym] = m;
    members[layer].add(file);
    if (type === 'U') uses.push({ layer, file, sym });
    else if (type === type.toUpperCase()) defs.set(sym, { layer, file });
  }
}

let bad = 0;
const crossings = {};
for (const { layer, file, sym } of uses) {
  const d = defs.get(sym);
  if (!d || d.layer === layer) continue;
  const k = `${layer} -> ${d.layer}`;
  crossings[k] = (crossings[k] ?? 0) + 1;
  if (!ALLOWED[layer].includes(d.layer)) {
    console.log(`not ok: ${layer} uses ${d.layer}: ${file} -> ${sym} (${d.file})`);
    bad++;
  }
}
for (const layer of Object.keys(ALLOWED)) {
  if (!members[layer]?.size) {
    console.log(`not ok: no object of layer ${layer} was read`);
    bad++;
  }
}
for (const [k, n] of Object.entries(crossings).sort()) console.log(`${k}: ${n} symbol uses`);
if (!crossings['front -> core'] || !crossings['app -> front']) {
  console.log('not ok: the symbol tables show none of the expected crossings');
  bad++;
}
console.log(bad ? `${bad} layering violation(s)` : 'layers point one way');
process.exit(bad ? 1 : 0);
