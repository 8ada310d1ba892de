// Counts the promises a process creates (v8.promiseHooks; with the hook on, V8 also makes the
// promises an `await` would otherwise skip, so the count is of the code's promise work, not its
// allocations). Load it first (--import) and send SIGUSR2 before and after a measured load: each signal prints
// "promises N" (the total so far) to stderr; the difference over the requests served is promises a
// request. Run by hand, e.g. (simple, c=1, JSON; bench/out/simple.json as bench/run.mjs writes it):
//   node --import ./bench/count-promises.mjs --initial-old-space-size=128 packages/cli/bin/triode.js serve \
//     --model-repository model_repository --model-control-mode explicit --load-model simple --http-port 18200 \
//     --http-address 127.0.0.1 --allow-grpc=false --allow-metrics=false --log-info=false 2> promises.log &
//   BODY_FILE=bench/out/simple.json wrk -t1 -c1 -d2s -s bench/post.lua http://127.0.0.1:18200/v2/models/simple/infer   # warm-up
//   kill -USR2 $!; BODY_FILE=bench/out/simple.json wrk -t1 -c1 -d3s -s bench/post.lua http://127.0.0.1:18200/v2/models/simple/infer; kill -USR2 $!
import { promiseHooks } from 'node:v8';
let count = 0;
promiseHooks.onInit(() => { count++; });
process.on('SIGUSR2', () => { process.stderr.write(`promises ${count}\n`); });
