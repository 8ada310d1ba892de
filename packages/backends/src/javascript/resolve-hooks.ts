/**
 * @module Module resolution hooks for model threads: the bare specifier `triode` in a model file
 * resolves to the model API (model-api.js), wherever the repository lives.
 */
let apiUrl = '';

/** Receives the API module's URL from `module.register`. */
export function initialize(data: { apiUrl: string }): void {
  apiUrl = data.apiUrl;
}

/** Maps `triode` to the API module; everything else resolves as usual. */
export async function resolve(
  specifier: string,
  context: unknown,
  next: (specifier: string, context: unknown) => Promise<{ url: string }>,
): Promise<{ url: string; shortCircuit?: boolean }> {
  if (specifier === 'triode') return { url: apiUrl, shortCircuit: true };
  return next(specifier, context);
}
