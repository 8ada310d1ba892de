// Differential fuzzing: the same seeded attack cases (test/fuzz/) sent one at a time to two running
// servers, usually `triode serve` and a `triode gateway` in front of workers on the same model
// repository, and every case whose answers differ in status is printed (grouped by family and
// status pair, with the first case's messages). Cases whose outcome is timing by design (resets,
// cancels, deadline storms, slowloris, streams, framing) or that change server state (repository
// control) are left out, as are answers that are no status (the client walked away, a hang).
// The fuzz repository: node -e "import('./test/fuzz/runner.mjs').then(m => console.log(m.makeRepository()))"
// Run by hand (bench/RESULTS.md, "The fuzz suite through a gateway"):
//   node bench/fuzz-diff.mjs --a HTTP_PORT:GRPC_PORT --b HTTP_PORT:GRPC_PORT [--seed 78] [--from 0] [--cases 2500]
import { parseArgs } from 'node:util';
import { makeCase, replayLine } from '../test/fuzz/runner.mjs';
import { exchange } from '../test/fuzz/http-exec.mjs';
import { grpcExchange } from '../test/fuzz/grpc-exec.mjs';
import { messageOf, statusKey } from '../test/fuzz/classify.mjs';

const { values: args } = parseArgs({ options: {
  a: { type: 'string' }, b: { type: 'string' },
  seed: { type: 'string', default: '78' }, from: { type: 'string', default: '0' }, cases: { type: 'string', default: '2500' },
  'hang-ms': { type: 'string', default: '8000' },
} });
if (!args.a || !args.b) {
  console.error('usage: node bench/fuzz-diff.mjs --a HTTP:GRPC --b HTTP:GRPC [--seed S] [--from N] [--cases K]');
  process.exit(2);
}
const ports = (s) => s.split(':').map(Number);
const [a, b] = [ports(args.a), ports(args.b)];
const seed = Number(args.seed);
const hangMs = Number(args['hang-ms']);
const TIMING_OR_STATE = /repository|control|slowloris|reset|goaway|cancel|deadline|framing|stream|storm/;

async function answers([http, grpc], c) {
  try {
    if (c.protocol === 'http') return [await exchange(http, c, hangMs)];
    return (await grpcExchange(grpc, c, hangMs)).outcomes;
  } catch (err) {
    return [{ clientError: String(err?.message ?? err) }];
  }
}

let compared = 0;
const groups = new Map();
for (let i = Number(args.from); i < Number(args.from) + Number(args.cases); i++) {
  const c = makeCase(seed, i, 'all');
  if (c.kind === 'skip' || c.kind === 'idle' || TIMING_OR_STATE.test(c.family)) continue;
  const [x, y] = [await answers(a, c), await answers(b, c)];
  const [kx, ky] = [x.map((o) => statusKey(c.protocol, o)).join(','), y.map((o) => statusKey(c.protocol, o)).join(',')];
  if (/aborted|closed|hang/.test(kx + ky) || x.concat(y).some((o) => o.clientError)) continue;
  compared++;
  if (kx === ky) continue;
  const key = `${c.protocol} ${c.family}: ${kx} -> ${ky}`;
  const g = groups.get(key);
  if (g) g.n++;
  else groups.set(key, { n: 1, first: `case ${i}: ${c.desc.slice(0, 100)}\n    a: ${String(messageOf(x[0]) ?? '').slice(0, 160)}\n    b: ${String(messageOf(y[0]) ?? '').slice(0, 160)}\n    replay: ${replayLine(seed, 'all', i)}` });
}
console.log(`seed ${seed}, cases ${args.from}..${Number(args.from) + Number(args.cases) - 1}: ${compared} compared, ${[...groups.values()].reduce((s, g) => s + g.n, 0)} differ`);
for (const [key, g] of groups) console.log(`- [${g.n}x] ${key}\n  ${g.first}`);
