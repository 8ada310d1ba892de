/**
 * @module Module resolution hooks for model threads: the bare specifier `triode` in a model file
 * resolves to the model API (model-api.js), wherever the repository lives; and a package the
 * model's own folder cannot find (`sharp`, say) is looked up among the server's packages, so a
 * repository on another disk can use what is installed with Triode.
 */
let apiUrl = '';

/** Receives the API module's URL from `module.register`. */
export function initialize(data: { apiUrl: string }): void {
  apiUrl = data.apiUrl;
}

interface ResolveContext {
  parentURL?: string;
  [k: string]: unknown;
}

/** Maps `triode` to the API module; everything else resolves as usual, then from the server. */
export async function resolve(
  specifier: string,
  context: ResolveContext,
  next: (specifier: string, context: ResolveContext) => Promise<{ url: string }>,
): Promise<{ url: string; shortCircuit?: boolean }> {
  if (specifier === 'triode') return { url: apiUrl, shortCircuit: true };
  try {
    return await next(specifier, context);
  } catch (err) {
    const bare = !specifier.startsWith('.') && !specifier.startsWith('/') && !specifier.includes(':');
    if (!bare || (err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    return next(specifier, { ...context, parentURL: apiUrl });
  }
}
