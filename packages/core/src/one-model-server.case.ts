/**
 * Test helpers: a server with one model "m" (IN -> OUT, INT32 [1]) of a backend named "testing"
 * whose every instance runs a given `execute`. Shared by the core tests that drive a model through
 * the server (backend-model.test.ts, sequence-requests.test.ts).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Backend, ExecuteRequest, ExecuteResult } from './backend-api.js';
import { InferenceServer } from './server.js';

/** A backend named "testing" whose every instance runs `execute`. */
export function backendWith(execute: (requests: ExecuteRequest[]) => Promise<ExecuteResult>): Backend {
  return {
    name: 'testing',
    async modelInitialize() {
      return {
        async instanceInitialize() {
          return { execute, async finalize() {} };
        },
        async finalize() {},
      };
    },
  };
}

/** The servers made here (and any a test adds), stopped by stopOneModelServers. */
export const servers: InferenceServer[] = [];

/** Stops the servers `serveOneModel` made (an afterEach), each within `timeoutMs`. */
export async function stopOneModelServers(timeoutMs: number): Promise<void> {
  await Promise.all(servers.splice(0).map((s) => s.stop(timeoutMs)));
}

/** A server with model "m" of `backend`, `config` appended to its config.pbtxt; throws unless READY. */
export async function serveOneModel(config: string, backend: Backend): Promise<InferenceServer> {
  const repo = mkdtempSync(join(tmpdir(), 'triode-model-'));
  mkdirSync(join(repo, 'm', '1'), { recursive: true });
  writeFileSync(join(repo, 'm', 'config.pbtxt'), `backend: "testing"\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n${config}`);
  const s = await InferenceServer.create({ modelRepositories: [repo], backends: [backend] });
  servers.push(s);
  const row = s.repositoryIndex()[0]!;
  if (row.state !== 'READY') throw new Error(row.reason);
  return s;
}
