// Issue #18: a callgrind profile of a server's main thread (bench/callgrind-http.sh, with
// CACHE_SIM=1 and `node --perf-basic-prof` in the server command) per function, JIT code named
// from node's /tmp/perf-<pid>.map: an event (I1mr: first-level instruction cache misses; Ir:
// instructions; ...) a request, summed by where the code comes from (Triode's packages, a
// dependency, Node's own JS, V8's builtins) and then per function. Run by hand:
//   CACHE_SIM=1 bash bench/callgrind-http.sh NAME json 4000 2000 -- node --perf-basic-prof ... server args ...
//   node bench/callgrind-jit.mjs bench/out/callgrind/NAME.out.1-01 2000 [I1mr] [top 40]
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
const [file, n, ev = 'I1mr', top = '40'] = process.argv.slice(2);
const out = execFileSync('callgrind_annotate', [`--show=${ev}`, `--sort=${ev}`, '--threshold=100', file], { maxBuffer: 1 << 28, encoding: 'utf8' });
const pid = out.match(/\(PID (\d+)/)[1];
const map = readFileSync(`/tmp/perf-${pid}.map`, 'utf8').split('\n').filter(Boolean).map((l) => { const [a, s, ...name] = l.split(' '); return [parseInt(a, 16), parseInt(s, 16), name.join(' ')]; }).sort((x, y) => x[0] - y[0]);
const find = (addr) => { let lo = 0, hi = map.length - 1, best = null; while (lo <= hi) { const m = (lo + hi) >> 1; if (map[m][0] <= addr) { best = map[m]; lo = m + 1; } else hi = m - 1; } return best && addr < best[0] + best[1] ? best[2] : null; };
const fn = new Map(), cat = new Map();
const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);
for (const line of out.split('\n')) {
  const m = line.match(/^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/);
  if (!m || m[2].includes('PROGRAM TOTALS')) continue;
  const v = Number(m[1].replace(/,/g, '')) / Number(n);
  let name = m[2];
  const a = name.match(/\?\?\?:0x([0-9a-f]+) \[\?\?\?\]/);
  let c;
  if (a) { const j = find(parseInt(a[1], 16)); name = j ? j.replace(/file:\/\/\/work\/main\//, '') : 'JIT?'; c = /packages\/(\w+)/.exec(name)?.[0] ?? (/node_modules\/([@\w-]+)/.exec(name)?.[0]) ?? (/node:/.test(name) ? 'node-js' : (/^(Builtin|Stub|BytecodeHandler)/.test(name) ? 'v8-stub' : 'jit-other')); }
  else c = /\[\/usr\/bin\/node\]/.test(name) ? (/Builtins_/.test(name) ? 'builtins' : 'node/v8') : /onnxruntime/.test(name) ? 'ort' : /libc/.test(name) ? 'libc' : 'other';
  add(fn, name.slice(0, 110), v); add(cat, c, v);
}
console.log([...cat].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${v.toFixed(0).padStart(7)} ${k}`).join('\n'));
console.log('---');
console.log([...fn].sort((a, b) => b[1] - a[1]).slice(0, Number(top)).map(([k, v]) => `${v.toFixed(0).padStart(7)} ${k}`).join('\n'));
