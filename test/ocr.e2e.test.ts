/**
 * The OCR pipeline end to end over HTTP: an encoded image in, its text lines out, through the
 * JavaScript `ocr` model and BLS calls to ppocr_det, ppocr_cls and ppocr_rec.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

let triode: Child;
let base: string;

/** POSTs an image as a binary BYTES tensor; returns the JSON response. */
async function ocr(image: Buffer): Promise<{ status: number; json: Record<string, unknown> }> {
  const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'IMAGE', shape: [1], datatype: 'BYTES', parameters: { binary_data_size: image.length + 4 } }] }));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(image.length);
  const r = await fetch(`${base}/v2/models/ocr/infer`, { method: 'POST', headers: { 'Inference-Header-Content-Length': String(header.length) }, body: Buffer.concat([header, len, image]) });
  return { status: r.status, json: await r.json() as Record<string, unknown> };
}

const out = (json: Record<string, unknown>, name: string) => (json['outputs'] as { name: string; data: unknown[]; shape: number[] }[]).find((o) => o.name === name)!;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const repo = makeRepository(['ocr', 'ppocr_det', 'ppocr_cls', 'ppocr_rec']);
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false']);
});

afterAll(async () => {
  await triode?.stop();
});

describe('ocr', () => {
  const png = readFileSync(join(ROOT, 'examples', 'ocr', 'sample.png'));

  it('reads the sample PNG\'s two lines, with boxes and scores', async () => {
    const r = await ocr(png);
    expect(r.status).toBe(200);
    expect(out(r.json, 'TEXT').data).toEqual(['Hello Triode 2026', 'inference server']);
    const box = out(r.json, 'BOX');
    expect(box.shape).toEqual([2, 4]);
    const [x0, y0, x1, y1] = box.data as number[];
    expect(x0).toBeLessThan(40);
    expect(y0).toBeGreaterThan(30);
    expect(x1).toBeGreaterThan(350);
    expect(y1).toBeLessThan(100);
    for (const s of out(r.json, 'SCORE').data as number[]) expect(s).toBeGreaterThan(0.9);
  });

  it('reads the same text from a JPEG', async () => {
    const r = await ocr(readFileSync(join(ROOT, 'examples', 'ocr', 'sample.jpg')));
    expect(out(r.json, 'TEXT').data).toEqual(['Hello Triode 2026', 'inference server']);
  });

  it('turns upside-down lines the right way (the direction classifier)', async () => {
    const upsideDown = await sharp(png).rotate(180).png().toBuffer();
    const r = await ocr(upsideDown);
    // The image is rotated as a whole, so the lines also come in the other order.
    expect([...(out(r.json, 'TEXT').data as string[])].sort()).toEqual(['Hello Triode 2026', 'inference server']);
  });

  it('answers a clear error for bytes that are not an image, and keeps serving', async () => {
    const r = await ocr(Buffer.from('definitely not a png'));
    expect(r.status).toBe(500);
    expect(String(r.json['error'])).toMatch(/^cannot decode the image \(PNG or JPEG expected\)/);
    expect((await ocr(png)).status).toBe(200);
  });
});
