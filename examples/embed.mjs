// Embedding Triode in a Node application: no network, typed tensors in and out.
// Run from the repository root after `npm install`: node examples/embed.mjs
import { InferenceServer } from '@triode/core';
import { OnnxRuntimeBackend } from '@triode/backends';

const server = await InferenceServer.create({
  modelRepositories: ['./model_repository'],
  backends: [new OnnxRuntimeBackend()],
});

const response = await server.infer({
  modelName: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Int32Array.from({ length: 16 }, (_, i) => i) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
  ],
});
for (const output of response.outputs) {
  console.log(output.name, output.shape, Array.from(output.data).join(' '));
}
await server.stop();
