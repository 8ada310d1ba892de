/**
 * @module A one-off thread that reads an ONNX model's inputs and outputs for auto-complete:
 * building a session parses the whole model (a 1 GB model blocked the main thread, health
 * included, for 2.2 s), so it runs here, and a load given up terminates the thread.
 * Posts `{ ins, outs }` or `{ error }`, then ends.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { onnxIo } from './model-io-check.js';
import { OnnxLoader } from './onnxruntime-loader.js';

const { file } = workerData as { file: string };
try {
  // The instances' loader: a tensor of a type onnxruntime-node cannot pass is refused by name.
  const session = await OnnxLoader.create(file, { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'disabled' });
  try {
    parentPort?.postMessage({ ins: onnxIo(session.inputMetadata), outs: onnxIo(session.outputMetadata) });
  } finally {
    await session.release();
  }
} catch (err) {
  parentPort?.postMessage({ error: err instanceof Error ? err.message : String(err) });
}
