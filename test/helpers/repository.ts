/** Test helper: a temporary model repository built from the examples plus extra models. */
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const EXAMPLES = join(ROOT, 'model_repository');

/** Copies the named example models and writes `extra` files (path -> text) into a new repository. */
export function makeRepository(examples: string[], extra: Record<string, string> = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'triode-test-repo-'));
  for (const m of examples) cpSync(join(EXAMPLES, m), join(root, m), { recursive: true });
  for (const [p, text] of Object.entries(extra)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), text);
  }
  return root;
}

/** A KServe v2 binary-extension body: JSON header then the chunks. */
export function binaryBody(header: unknown, chunks: ArrayBufferView[]): { body: Buffer; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header));
  const parts = chunks.map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength));
  return { body: Buffer.concat([json, ...parts]), headerLength: json.byteLength };
}

/** Splits a binary response into its JSON header and the bytes after it. */
export function splitBinary(body: Buffer, headerLength: number): { json: Record<string, unknown>; rest: Buffer } {
  return { json: JSON.parse(body.subarray(0, headerLength).toString()) as Record<string, unknown>, rest: body.subarray(headerLength) };
}
