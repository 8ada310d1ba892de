// Why gRPC calls form smaller batches than HTTP/1.1 calls in Triode (bench/RESULTS.md, "what a gRPC
// call costs the server"): a bare server, no Triode, queues each request and answers the queue
// from one setImmediate (the check phase, where Triode runs a batch that waited for a loop turn),
// after ~20 µs of busy work standing in for a model run, and prints the requests a batch every 2 s.
// Over HTTP/1.1 an answer is written as it is made; node:http2 writes a session's frames from a
// native immediate, which Node runs at the start of the check phase (src/env.cc CheckImmediate:
// native immediates, then JS immediates), so an answer made in the check phase goes out one loop
// iteration later. Run by hand, with h2load (apt-get install nghttp2-client) and any request body:
//   taskset -c 1 node bench/h2-check-phase.mjs h1 18900 &   # then, from cpu 0:
//   taskset -c 0 h2load --h1 -D 6 -c 16 -m 1 -d BODY http://127.0.0.1:18900/x
//   taskset -c 1 node bench/h2-check-phase.mjs h2 18900 &
//   taskset -c 0 h2load -D 6 -c 16 -m 1 -d BODY -H 'content-type: application/grpc' http://127.0.0.1:18900/x
// Stop each server with Ctrl-C or kill (it runs until stopped).
import http from 'node:http';
import http2 from 'node:http2';
import { setImmediate, setInterval } from 'node:timers';

const [proto = 'h2', port = '18900'] = process.argv.slice(2);
const answer = Buffer.alloc(150);
let pending = [];
let batches = 0;
let requests = 0;
const burn = () => {
  const t = process.hrtime.bigint();
  while (process.hrtime.bigint() - t < 20_000n);
};
const flush = () => {
  const batch = pending;
  pending = [];
  batches++;
  requests += batch.length;
  burn();
  for (const f of batch) f();
};
const enqueue = (f) => {
  pending.push(f);
  if (pending.length === 1) setImmediate(flush);
};
setInterval(() => {
  if (batches) console.log(`${proto}: ${(requests / batches).toFixed(2)} requests a batch`);
  batches = requests = 0;
}, 2000);

if (proto === 'h1') {
  const server = http.createServer((req, res) => {
    req.on('data', () => undefined);
    req.on('end', () => enqueue(() => res.end(answer)));
  });
  server.on('clientError', (_, socket) => socket.destroy());
  server.listen(Number(port), '127.0.0.1');
} else {
  const server = http2.createServer();
  server.on('sessionError', () => undefined);
  server.on('stream', (stream) => {
    stream.on('error', () => undefined);
    stream.on('data', () => undefined);
    stream.on('end', () => enqueue(() => {
      if (stream.destroyed) return;
      stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto' }, { waitForTrailers: true, sendDate: false });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(answer);
    }));
  });
  server.listen(Number(port), '127.0.0.1');
}
