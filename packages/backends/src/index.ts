/** @module @triode/backends: the code that runs models (onnxruntime, javascript). */
export { OnnxRuntimeBackend, type OnnxRuntimeBackendOptions } from './onnxruntime/onnxruntime-backend.js';
export { sessionSettings, ortTypeToDataType, dataTypeToOrtType } from './onnxruntime/onnxruntime-utils.js';
export { autoCompleteOnnxConfig } from './onnxruntime/autocomplete-config.js';
export { JavaScriptBackend, type JavaScriptBackendOptions } from './javascript/javascript-backend.js';
