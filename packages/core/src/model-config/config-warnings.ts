/**
 * @module The warnings a model's config loaded with (hints Triode does not apply: see
 * `unimplemented-config.ts`), kept beside the config so that the model's config response shows
 * them too, not only the log: `parameters["triode.config_warnings"]`, one warning per line.
 * Triton: no counterpart (Triton applies these fields).
 */
import type { ModelConfig } from './model-config.js';

/** The parameter key the warnings are answered under in a config response. */
export const CONFIG_WARNINGS_PARAMETER = 'triode.config_warnings';

const warningsOf = new WeakMap<ModelConfig, readonly string[]>();

/** Records the warnings `config` loaded with (none: forgets any). */
export function setConfigWarnings(config: ModelConfig, warnings: readonly string[]): void {
  if (warnings.length === 0) warningsOf.delete(config);
  else warningsOf.set(config, [...warnings]);
}

/** The warnings `config` loaded with. */
export function configWarnings(config: ModelConfig): readonly string[] {
  return warningsOf.get(config) ?? [];
}

/**
 * A config response (`modelConfigToJson`'s output) with the warnings added as a string parameter;
 * the config itself is left as it is (the model never sees the parameter).
 */
export function withConfigWarnings(json: Record<string, unknown>, config: ModelConfig): Record<string, unknown> {
  const warnings = configWarnings(config);
  if (warnings.length === 0) return json;
  const parameters = { ...(json['parameters'] as Record<string, unknown> | undefined) };
  parameters[CONFIG_WARNINGS_PARAMETER] = { string_value: warnings.join('\n') };
  return { ...json, parameters };
}
