/** @module GPUs: discovery (nvidia-smi), placement of instances, choice of execution provider. */
export * from './gpu-discovery.js';
export * from './gpu-placement.js';
export * from './execution-provider.js';
