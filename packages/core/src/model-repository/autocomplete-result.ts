/**
 * @module A backend's auto-completed config, read back through the config schema before anything
 * uses it. A javascript model's own code (its static `autoCompleteConfig`) writes it, so it is
 * client data: a wrong type, an unknown field or a `__proto__` key fails that model's load with
 * INVALID_ARG naming the model, as Triton's parse of a backend's updated config does, and never
 * reaches the scheduler, the ensemble code or the config response as something else.
 * Triton: core/src/backend_model.cc TritonModel::UpdateModelConfig (JsonToModelConfig)
 */
import { Errors, TriodeError } from '../errors.js';
import { modelConfigFromJson } from '../model-config/model-config-json.js';
import type { ModelConfig } from '../model-config/model-config.js';

const PARSE_PREFIX = 'failed to parse model configuration: ';

/**
 * The config a backend's auto-completion left for model `name`, read again through the schema:
 * a fresh object holding only the fields of `ModelConfig`, each of its type.
 * @throws TriodeError INVALID_ARG "auto-complete of model '<name>' returned an invalid config: ..."
 */
export function readAutoCompletedConfig(completed: unknown, name: string): ModelConfig {
  try {
    return modelConfigFromJson(completed);
  } catch (err) {
    // The reader's own errors name the field; anything else is not shown (a raw TypeError's text
    // says nothing to a client).
    const detail = err instanceof TriodeError ? err.message.replace(PARSE_PREFIX, '') : 'it could not be read as a model configuration';
    throw Errors.invalidArg(`auto-complete of model '${name}' returned an invalid config: ${detail}`);
  }
}
