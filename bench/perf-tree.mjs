// A `perf record -g` profile of a server as a tree of its JS functions, in µs of CPU a request:
// each sample's stack is cut down to its JS frames (and a native leaf), so a function's figure is
// everything it ran, natives included. bench/perf-main.sh records and calls it. Run by hand:
//   node bench/perf-tree.mjs FILE REQUESTS [--under TEXT] [--depth 3] [--hz 2999] [--self]
// FILE: a `perf record` file, or `perf script`'s text of one (FILE.script from bench/perf-main.sh,
// named while node's symbol map of the server was still there). REQUESTS: the requests served
// while perf recorded. --under roots the tree at the first frame
// containing TEXT; --self lists the leaves (JS function > native symbol) under it instead.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: o, positionals: [file, requests] } = parseArgs({
  allowPositionals: true,
  options: { under: { type: 'string', default: '' }, depth: { type: 'string', default: '3' }, hz: { type: 'string', default: '2999' }, self: { type: 'boolean', default: false } },
});
if (!file || !(Number(requests) > 0)) {
  console.error('usage: node bench/perf-tree.mjs FILE REQUESTS [--under TEXT] [--depth N] [--hz N] [--self]');
  process.exit(2);
}
const usPerSample = 1e6 / Number(o.hz) / Number(requests);
const text = file.endsWith('.perf') ? execFileSync('perf', ['script', '-i', file], { maxBuffer: 1 << 30, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }) : readFileSync(file, 'utf8');
const short = (f) => f.replace(/file:\/\/\/\S*?\/(packages|node_modules|bench)\//, '$1/').replace(/^JS:[*^~]?/, '');
const root = { n: 0, kids: new Map() };
const leaves = new Map();
let frames = [];
const sample = () => {
  if (frames.length === 0) return;
  const stack = frames.reverse();
  frames = [];
  const leaf = stack[stack.length - 1];
  let js = stack.filter((f) => f.startsWith('JS:')).map(short);
  if (!leaf.startsWith('JS:')) js.push(`[${leaf.slice(0, 70)}]`);
  if (o.under) {
    const k = js.findIndex((f) => f.includes(o.under));
    if (k < 0) return;
    js = js.slice(k);
  }
  let node = root;
  node.n++;
  for (const f of js) {
    if (!node.kids.has(f)) node.kids.set(f, { n: 0, kids: new Map() });
    node = node.kids.get(f);
    node.n++;
  }
  const lastJs = js.filter((f) => !f.startsWith('[')).pop() ?? '(no JS frame)';
  const key = leaf.startsWith('JS:') ? lastJs : `${lastJs} > ${leaf.slice(0, 70)}`;
  leaves.set(key, (leaves.get(key) ?? 0) + 1);
};
for (const line of text.split('\n')) {
  if (line === '') sample();
  else if (line.startsWith('\t') || line.startsWith(' ')) {
    const m = line.trim().match(/^[0-9a-f]+ (.*) \(([^)]*)\)$/);
    if (m) frames.push(m[1].replace(/\+0x[0-9a-f]+$/, ''));
  } else sample();
}
sample();
const us = (n) => (n * usPerSample).toFixed(2).padStart(8);
console.log(`${us(root.n)}  µs a request${o.under ? ` under ${o.under}` : ''} (${root.n} samples)`);
if (o.self) {
  for (const [k, n] of [...leaves].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${us(n)}  ${k}`);
} else {
  const show = (node, depth, indent) => {
    for (const [k, c] of [...node.kids].sort((a, b) => b[1].n - a[1].n)) {
      if (c.n * usPerSample < 0.4) continue;
      console.log(`${us(c.n)}  ${indent}${k.slice(0, 110)}`);
      if (depth < Number(o.depth)) show(c, depth + 1, `${indent}  `);
    }
  };
  show(root, 1, '');
}
