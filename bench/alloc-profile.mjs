// Issue #18: where a server's main thread allocates, by function (V8's sampling heap profiler,
// counting objects the young- and old-generation collections freed too: every allocation, not
// what is left alive). Load it first (--import) and send SIGUSR2 before and after a measured load:
// the first starts sampling, the second writes the bytes sampled by function (self) to
// $ALLOC_OUT (default bench/out/alloc.json) and to stderr, largest first. Divide by the requests
// served for bytes a request. Run by hand, e.g. (simple, c=1, JSON):
//   node --import ./bench/alloc-profile.mjs --initial-old-space-size=128 packages/cli/bin/triode.js serve \
//     --model-repository model_repository --model-control-mode explicit --load-model simple --http-port 18200 \
//     --http-address 127.0.0.1 --allow-grpc=false --allow-metrics=false --log-info=false 2> alloc.log &
//   BODY_FILE=bench/out/simple.json wrk -t1 -c1 -d2s -s bench/post.lua http://127.0.0.1:18200/v2/models/simple/infer   # warm-up
//   kill -USR2 $!; BODY_FILE=bench/out/simple.json wrk -t1 -c1 -d3s -s bench/post.lua http://127.0.0.1:18200/v2/models/simple/infer; kill -USR2 $!
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
const session = new Session();
session.connect();
const post = (method, params = {}) => new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));
let sampling = false;
process.on('SIGUSR2', async () => {
  if (!sampling) {
    sampling = true;
    await post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    process.stderr.write('alloc sampling started\n');
    return;
  }
  sampling = false;
  const { profile } = await post('HeapProfiler.stopSampling');
  const by = new Map();
  let total = 0;
  const walk = (n) => {
    const f = n.callFrame;
    const self = n.selfSize;
    if (self) {
      const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^file:\/\/.*?\/(packages|node_modules|bench)\//, '$1/')}:${f.lineNumber + 1}`;
      by.set(key, (by.get(key) ?? 0) + self);
      total += self;
    }
    for (const c of n.children) walk(c);
  };
  walk(profile.head);
  const rows = [...by].sort((a, b) => b[1] - a[1]);
  writeFileSync(process.env.ALLOC_OUT ?? 'bench/out/alloc.json', JSON.stringify({ total, rows }, null, 1));
  process.stderr.write(`alloc total ${total}\n${rows.slice(0, 40).map(([k, v]) => `${String(v).padStart(10)} ${k}`).join('\n')}\n`);
});
