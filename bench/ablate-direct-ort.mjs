// Issue #18, an ablation: what Triode's core and onnxruntime backend cost a lone `simple` request,
// against the HTTP frontend alone. `apply` patches the built HTTP infer fast path
// (packages/frontends/dist/http/infer-fast-path.js, after `npm run build`) so that, in a server
// started with ABLATE=1 in its environment, a request to `simple` skips the core and the backend:
// its parsed inputs go to one onnxruntime-node session (1 intra-op thread, as the naive server's)
// and its outputs to the same response encoder. Without ABLATE=1 the patched server is Triode as
// built. `restore` puts the file back. Not for serving: it answers `simple` only, with no checks.
//   npm run build && node bench/ablate-direct-ort.mjs apply
//   T='node --initial-old-space-size=128 packages/cli/bin/triode.js serve --model-repository model_repository
//      --model-control-mode explicit --load-model simple --http-port PORT --http-address 127.0.0.1
//      --allow-grpc=false --allow-metrics=false --log-info=false'
//   bash bench/pair-windows.sh --pairs 8 --seconds 2 -c 1 --json -- "env ABLATE=1 $T" 'node bench/naive-server.mjs PORT model_repository'
//   node bench/ablate-direct-ort.mjs restore
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const file = fileURLToPath(new URL('../packages/frontends/dist/http/infer-fast-path.js', import.meta.url));
const backup = `${file}.before-ablation`;
const [what] = process.argv.slice(2);

if (what === 'restore') {
  if (!existsSync(backup)) throw new Error(`nothing to restore: ${backup} is not there`);
  copyFileSync(backup, file);
  rmSync(backup);
  console.log(`restored ${file}`);
} else if (what === 'apply') {
  if (existsSync(backup)) throw new Error(`already applied (${backup} is there): restore first`);
  let s = readFileSync(file, 'utf8');
  const serve = 'async function serve(req, res, name, version, deps) {';
  const call = 'return inferResponseBody(await backplane.infer(request),';
  if (!s.includes(serve) || !s.includes(call)) throw new Error(`${file} is not the build this patch knows: update bench/ablate-direct-ort.mjs`);
  s = s.replace(serve, `import * as __ort from 'onnxruntime-node';
const __session = process.env.ABLATE ? await __ort.InferenceSession.create(new URL('../../../../model_repository/simple/1/model.onnx', import.meta.url).pathname, { intraOpNumThreads: 1, interOpNumThreads: 1 }) : undefined;
async function __infer(request) {
  const feeds = {};
  for (const t of request.inputs) feeds[t.name] = new __ort.Tensor('int32', t.data, t.shape);
  const out = await __session.run(feeds);
  return { modelName: 'simple', modelVersion: '1', outputs: Object.entries(out).map(([name, t]) => ({ name, datatype: 'INT32', shape: t.dims, data: t.data })) };
}
${serve}`);
  s = s.replace(call, 'return inferResponseBody(await (__session && name === \'simple\' ? __infer(request) : backplane.infer(request)),');
  copyFileSync(file, backup);
  writeFileSync(file, s);
  console.log(`patched ${file} (start the server with ABLATE=1; \`node bench/ablate-direct-ort.mjs restore\` undoes it)`);
} else {
  console.error('usage: node bench/ablate-direct-ort.mjs apply|restore');
  process.exit(2);
}
