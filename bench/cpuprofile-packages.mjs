// Self time of a V8 .cpuprofile grouped by package (packages/<name>, node_modules/<name>, node
// internals, GC, idle), as shares and as µs per request when given the request count. Only the
// samples between the first and the last one under an infer request (a stack through
// infer-fast-path, or through bench/naive-server.mjs or bench/floor-server.mjs) count, so start-up and shutdown are left out.
//   node bench/cpuprofile-packages.mjs <file.cpuprofile> [requests] [package, e.g. packages/core: its functions too]
import { readFileSync } from 'node:fs';
const [file, requests] = process.argv.slice(2);
const p = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const underInfer = new Map();
const isInfer = (id) => {
  if (underInfer.has(id)) return underInfer.get(id);
  const n = byId.get(id);
  const v = (n.callFrame.url.includes('infer-fast-path') && ['serve', 'send'].includes(n.callFrame.functionName)) || n.callFrame.url.endsWith('/naive-server.mjs') || n.callFrame.url.endsWith('/floor-server.mjs') || (parent.has(id) && isInfer(parent.get(id)));
  underInfer.set(id, v);
  return v;
};
const at = [];
let clock = p.startTime;
for (let i = 0; i < p.samples.length; i++) at.push((clock += p.timeDeltas[i] ?? 0));
let from = 0;
let to = p.samples.length - 1;
while (from < to && !isInfer(p.samples[from])) from++;
while (to > from && !isInfer(p.samples[to])) to--;
const group = (f) => {
  const m = /\/(packages|node_modules)\/((?:@[^/]+\/)?[^/]+)\//.exec(f.url);
  if (m) return `${m[1]}/${m[2]}`;
  if (f.url.startsWith('node:')) return 'node internals';
  if (f.url) return f.url.replace(/.*\//, '');
  return `(${f.functionName || 'native'})`;
};
const self = new Map();
let total = 0;
for (let i = from + 1; i <= to; i++) {
  const t = p.timeDeltas[i] ?? 0;
  const k = group(byId.get(p.samples[i]).callFrame);
  self.set(k, (self.get(k) ?? 0) + t);
  total += t;
}
const n = Number(requests ?? 0);
for (const [k, t] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 20)) {
  console.log(`${(100 * t / total).toFixed(1).padStart(5)}%  ${n ? `${(t / n).toFixed(2).padStart(7)} µs/req  ` : ''}${k}`);
}
console.log(`window ${((at[to] - at[from]) / 1e6).toFixed(2)} s, self time ${(total / 1e6).toFixed(2)} s${n ? `, ${n} requests` : ''}`);
// With a third argument (a package, e.g. packages/core): that package's functions.
const only = process.argv[4];
if (only) {
  const fn = new Map();
  for (let i = from + 1; i <= to; i++) {
    const f = byId.get(p.samples[i]).callFrame;
    if (group(f) !== only) continue;
    const k = `${f.functionName || '(anon)'} ${f.url.replace(/.*\/(packages|node_modules)\//, '')}:${f.lineNumber + 1}`;
    fn.set(k, (fn.get(k) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  for (const [k, t] of [...fn.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
    console.log(`${(100 * t / total).toFixed(2).padStart(6)}%  ${n ? `${(t / n).toFixed(2).padStart(7)} µs/req  ` : ''}${k}`);
  }
}
