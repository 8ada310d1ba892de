/**
 * @module The model repository extension: `POST /v2/repository/index`, and
 * `POST /v2/repository/models/{m}/load|unload` (explicit model control).
 * Triton: server/src/http_server.cc HandleRepositoryIndex, HandleRepositoryControl,
 * docs/protocol/extension_model_repository.md
 */
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { Errors, checkModelName, echo } from '@triode/core';
import { loadOptionsFrom, type LoadParameter } from '../../control/load-parameters.js';
import type { HttpDeps } from '../http-options.js';
import { refuseRepositoryName } from '../../control/repository-name.js';

async function body(c: Context): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (!text.trim()) return {};
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${(err as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw Errors.invalidArg('the request must be a JSON object');
  return doc as Record<string, unknown>;
}

function parameters(doc: Record<string, unknown>): Record<string, unknown> {
  const p = doc['parameters'];
  if (p === undefined) return {};
  if (typeof p !== 'object' || p === null || Array.isArray(p)) throw Errors.invalidArg("'parameters' must be a JSON object");
  return p as Record<string, unknown>;
}

/** A model load/unload path; group 1 is the model name as sent (percent-encoded). */
const MODEL_CONTROL_PATH = /^\/v2\/repository(?:\/[^/]+)?\/models\/([^/]+)\/(?:load|unload)$/;

/**
 * Refuses a load/unload whose model name is not a name (`checkModelName`: 400) before anything
 * reads the request body, which may be large. Mounted ahead of the body limit.
 */
export function modelNameGuard(): MiddlewareHandler {
  return async (c, next) => {
    const m = MODEL_CONTROL_PATH.exec(c.req.path);
    if (m) {
      let name = m[1]!;
      try {
        name = decodeURIComponent(name);
      } catch {
        // Not valid percent-encoding: checked as sent.
      }
      checkModelName(name);
    }
    await next();
  };
}

/** The repository routes (with or without a repository name in the path, as Triton). */
export function repositoryRoutes({ backplane }: HttpDeps): Hono {
  const app = new Hono();
  for (const prefix of ['/v2/repository', '/v2/repository/:repository']) {
    app.post(`${prefix}/index`, async (c) => {
      const ready = (await body(c))['ready'];
      if (ready !== undefined && typeof ready !== 'boolean') throw Errors.invalidArg("'ready' must be a boolean");
      return c.json(await backplane.repositoryIndex(ready === true));
    });
    app.post(`${prefix}/models/:model/load`, async (c) => {
      refuseRepositoryName(c.req.param('repository'));
      const name = c.req.param('model');
      // A hostile name is refused before the body (which may be large) is read.
      checkModelName(name);
      const params = parameters(await body(c));
      for (const [k, v] of Object.entries(params)) {
        if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
          throw Errors.invalidArg(`failed to load '${name}': parameter '${echo(k)}' must be a string, number or boolean`);
        }
      }
      await backplane.loadModel(name, loadOptionsFrom(name, params as Record<string, LoadParameter>));
      return c.body('', 200, { 'Content-Type': 'application/json' });
    });
    app.post(`${prefix}/models/:model/unload`, async (c) => {
      refuseRepositoryName(c.req.param('repository'));
      const name = c.req.param('model');
      checkModelName(name);
      const params = parameters(await body(c));
      const dependents = params['unload_dependents'];
      if (dependents !== undefined && typeof dependents !== 'boolean') throw Errors.invalidArg("'unload_dependents' must be a boolean");
      await backplane.unloadModel(name, { unloadDependents: dependents === true });
      return c.body('', 200, { 'Content-Type': 'application/json' });
    });
  }
  return app;
}
