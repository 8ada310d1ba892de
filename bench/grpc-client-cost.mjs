// What a ModelInfer call costs @triode/client's GrpcClient in CPU (this process's user + system
// time, process.cpuUsage, over sequential calls of `simple`), through @grpc/grpc-js
// (`leanInfer: false`) and through the lean node:http2 path (the default on plaintext channels),
// against one `triode serve` (the bin, on the server's cpus as bench/pinning.mjs lays them out).
// Rounds alternate the two clients; medians. The figure docs/architecture.md quotes for why the
// lean path exists. Needs `npm run build`. Run by hand:
//   node bench/grpc-client-cost.mjs [--calls 3000] [--warmup 500] [--rounds 3]
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { GrpcClient } from '@triode/client';
import { layout, machine as describeMachine } from './pinning.mjs';
import { fmt, freePort, median, start, stop } from './harness.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: {
  calls: { type: 'string', default: '3000' },
  warmup: { type: 'string', default: '500' },
  rounds: { type: 'string', default: '3' },
  pin: { type: 'string', default: 'auto' },
} });
const [CALLS, WARMUP, ROUNDS] = [Number(args.calls), Number(args.warmup), Number(args.rounds)];
const PIN = layout(availableParallelism(), args.pin);
const machine = describeMachine(PIN, { server: 'server' });
const where = `server ${PIN.server ? `on cpu ${PIN.server}` : 'not pinned'}; the client (this process) not pinned`;

const inputs = [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Int32Array.from({ length: 16 }, (_, i) => i) },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
];
const [http, grpc] = [await freePort(), await freePort()];
const server = await start(PIN.server, [join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', join(ROOT, 'model_repository'),
  '--model-control-mode', 'explicit', '--load-model', 'simple', '--http-port', String(http), '--http-address', '127.0.0.1',
  '--grpc-port', String(grpc), '--grpc-address', '127.0.0.1', '--allow-metrics=false'], /Started GRPCInferenceService at/, ROOT);
const rows = [];
try {
  const clients = { 'grpc-js': new GrpcClient(`127.0.0.1:${grpc}`, { leanInfer: false }), 'lean http2': new GrpcClient(`127.0.0.1:${grpc}`) };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, client] of round % 2 ? Object.entries(clients).reverse() : Object.entries(clients)) {
      for (let i = 0; i < WARMUP; i++) await client.infer('simple', { inputs });
      const [c0, t0] = [process.cpuUsage(), performance.now()];
      for (let i = 0; i < CALLS; i++) await client.infer('simple', { inputs });
      const [c1, t1] = [process.cpuUsage(c0), performance.now()];
      rows.push({ round, client: name, cpuUsPerCall: (c1.user + c1.system) / CALLS, callsPerSec: CALLS / ((t1 - t0) / 1000) });
      console.log(JSON.stringify(rows.at(-1)));
    }
  }
  for (const c of Object.values(clients)) c.close();
} finally {
  await stop(server);
}
console.log(`\nMachine: ${machine.cores} cores (${machine.cpu}); ${where}. ${ROUNDS} rounds of ${CALLS} sequential calls (+${WARMUP} warm-up); medians.\n`);
console.log('| client | client CPU µs a call | calls/s |');
console.log('|---|---|---|');
for (const name of ['grpc-js', 'lean http2']) {
  const mine = rows.filter((r) => r.client === name);
  console.log(`| ${name} | ${fmt(median(mine.map((r) => r.cpuUsPerCall)), 1)} | ${fmt(median(mine.map((r) => r.callsPerSec)))} |`);
}
