// Issue #14 fuzz suite, long form: seeded attack cases against `triode serve` (HTTP and gRPC) for a
// time budget; prints a summary table (cases, by status, crashes, hangs, unexplained 5xx, leaks,
// RSS) and a replay line per distinct failure. The engine lives in test/fuzz/ (plain ESM, no build);
// test/fuzz.e2e.test.ts runs a fixed-count slice of it in CI.
//   node bench/fuzz.mjs --minutes 10 [--seed S] [--protocol http|grpc|all] [--batch 16] [--verbose]
//   node bench/fuzz.mjs --port 8000 --grpc-port 8001 [--pid PID] --minutes 1   (a running server: no restarts; RSS with --pid)
//   node bench/fuzz.mjs --seed S --protocol P --case N [--show]     (replay one case; --show prints its bytes)
//   node bench/fuzz.mjs --seed S --protocol P --from N --cases 16   (replay a batch, for a crash no single case reproduces)
// Exit status: 1 when there was a crash, hang, unexplained 5xx, leak or escape.
import { parseArgs } from 'node:util';
import { formatSummary, makeCase, requestBytes, runFuzz } from '../test/fuzz/runner.mjs';

const { values: args } = parseArgs({ options: {
  minutes: { type: 'string', default: '1' },
  cases: { type: 'string' },
  seed: { type: 'string' },
  protocol: { type: 'string', default: 'all' },
  port: { type: 'string' },
  'grpc-port': { type: 'string', default: '8001' },
  pid: { type: 'string' },
  batch: { type: 'string', default: '16' },
  'hang-ms': { type: 'string', default: '10000' },
  case: { type: 'string', multiple: true },
  from: { type: 'string' },
  show: { type: 'boolean', default: false },
  verbose: { type: 'boolean', default: false },
} });

if (!['http', 'grpc', 'all'].includes(args.protocol)) {
  console.error(`--protocol must be http, grpc or all, got '${args.protocol}'`);
  process.exit(2);
}
// Ctrl-C: exit through 'exit' handlers, which stop the server this run started.
process.once('SIGINT', () => process.exit(130));
const seed = args.seed !== undefined ? Number(args.seed) : Math.floor(Math.random() * 2 ** 31);
// --case N (repeatable) replays cases; --from N --cases K replays a batch (cases N..N+K-1).
const only = args.case?.map(Number) ?? (args.from !== undefined ? Array.from({ length: Number(args.cases ?? 16) }, (_, i) => Number(args.from) + i) : undefined);
if (only && args.show) {
  for (const i of only) {
    const c = makeCase(seed, i, args.protocol);
    console.log(`case ${i} (${c.protocol} ${c.family}): ${c.desc}\n${JSON.stringify(requestBytes(c).toString('latin1').slice(0, 4000))}`);
  }
}
const options = {
  seed, protocol: args.protocol, batch: Number(args.batch), hangMs: Number(args['hang-ms']),
  log: (line) => console.error(`[fuzz] ${line}`), traceCases: only !== undefined,
  ...(only ? { only } : args.cases !== undefined ? { cases: Number(args.cases) } : { minutes: Number(args.minutes) }),
  ...(args.port !== undefined ? { httpPort: Number(args.port), grpcPort: Number(args['grpc-port']), ...(args.pid ? { pid: Number(args.pid) } : {}) } : {}),
};
console.error(`[fuzz] seed ${seed}, protocol ${args.protocol}, ${only ? `case(s) ${only.join(',')}` : options.cases !== undefined ? `${options.cases} cases` : `${options.minutes} min`}`);
const summary = await runFuzz(options);
console.log(`command: node bench/fuzz.mjs ${process.argv.slice(2).join(' ')}${args.seed === undefined ? ` (seed ${seed})` : ''}\n`);
console.log(formatSummary(summary, args.verbose));
process.exit(summary.failures.length ? 1 : 0);
