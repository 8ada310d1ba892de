/** @module @triode/cli: the `triode` command. */
export { main } from './main.js';
export { startServe, type RunningServer } from './serve.js';
export { addServeFlags, toServeOptions, parseBackendConfig, type ServeOptions } from './serve-options.js';
export { modelTable } from './model-table.js';
