// OCR pipeline: image bytes -> PP-OCR det -> DB boxes -> crops -> cls (0/180) -> rec -> CTC text.
// The three PP-OCR models run in their own instances; this model only does the CPU work between
// them and calls them through the server (BLS).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { bytes, infer, tensor, TritonModelError } from 'triode';

const DET_MEAN = [0.485, 0.456, 0.406];
const DET_STD = [0.229, 0.224, 0.225];
const REC_HEIGHT = 48;
const CLS_WIDTH = 192;

/** RGB (HWC, uint8) -> BGR planes (CHW, float32), normalized per channel as PaddleOCR does. */
function toChw(rgb, width, height, mean, std, outWidth = width) {
  const out = new Float32Array(3 * height * outWidth);
  const plane = height * outWidth;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const p = (y * width + x) * 3;
      for (let c = 0; c < 3; c++) {
        // BGR: channel c reads RGB component 2 - c.
        out[c * plane + y * outWidth + x] = (rgb[p + 2 - c] / 255 - mean[c]) / std[c];
      }
    }
  }
  return out;
}

async function resizeRgb(rgb, width, height, toWidth, toHeight) {
  return sharp(rgb, { raw: { width, height, channels: 3 } }).resize(toWidth, toHeight, { fit: 'fill' }).raw().toBuffer();
}

/** DB post-processing: connected regions of the probability map above `thresh`, as boxes. */
function dbBoxes(prob, w, h, { thresh, boxThresh, unclipRatio }) {
  const seen = new Uint8Array(w * h);
  const boxes = [];
  const stack = [];
  for (let start = 0; start < w * h; start++) {
    if (seen[start] || prob[start] <= thresh) continue;
    let minX = w, minY = h, maxX = 0, maxY = 0, sum = 0, n = 0;
    stack.push(start);
    seen[start] = 1;
    while (stack.length) {
      const i = stack.pop();
      const x = i % w;
      const y = (i - x) / w;
      sum += prob[i];
      n++;
      if (x < minX) minX = x;
      if (x > maxX) maxX = x;
      if (y < minY) minY = y;
      if (y > maxY) maxY = y;
      for (const j of [i - 1, i + 1, i - w, i + w]) {
        if (j < 0 || j >= w * h || seen[j] || prob[j] <= thresh) continue;
        if ((j === i - 1 && x === 0) || (j === i + 1 && x === w - 1)) continue;
        seen[j] = 1;
        stack.push(j);
      }
    }
    const bw = maxX - minX + 1;
    const bh = maxY - minY + 1;
    if (Math.min(bw, bh) < 3 || sum / n < boxThresh) continue;
    // The map marks shrunk text kernels: grow each box back (DB's unclip, for a rectangle).
    const d = (bw * bh * unclipRatio) / (2 * (bw + bh));
    boxes.push({ x0: minX - d, y0: minY - d, x1: maxX + 1 + d, y1: maxY + 1 + d, score: sum / n });
  }
  return boxes;
}

function argmaxRows(data, rows, cols) {
  const idx = new Int32Array(rows);
  const val = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let best = 0;
    for (let c = 1; c < cols; c++) if (data[r * cols + c] > data[r * cols + best]) best = c;
    idx[r] = best;
    val[r] = data[r * cols + best];
  }
  return { idx, val };
}

export default class Ocr {
  initialize(args) {
    const p = args.config.parameters ?? {};
    const num = (k, d) => Number(p[k]?.string_value ?? d);
    this.limit = num('det_limit_side_len', 960);
    this.db = { thresh: num('det_db_thresh', 0.3), boxThresh: num('det_db_box_thresh', 0.6), unclipRatio: num('det_db_unclip_ratio', 1.5) };
    this.clsThresh = num('cls_thresh', 0.9);
    // CTC classes: blank, the dictionary's characters, then space.
    const keys = readFileSync(join(args.model_repository, 'ppocr_rec', 'ppocr_keys_v1.txt'), 'utf8').split('\n');
    if (keys[keys.length - 1] === '') keys.pop();
    this.charset = ['', ...keys, ' '];
  }

  async execute(requests) {
    return Promise.all(requests.map(async (r) => {
      try {
        const image = bytes(r.input('IMAGE'))[0];
        const lines = await this.read(image);
        return {
          outputs: [
            tensor('TEXT', 'BYTES', [lines.length], lines.map((l) => l.text)),
            tensor('BOX', 'INT32', [lines.length, 4], lines.flatMap((l) => l.box)),
            tensor('SCORE', 'FP32', [lines.length], lines.map((l) => l.score)),
          ],
        };
      } catch (err) {
        return new TritonModelError(err.message);
      }
    }));
  }

  async call(model, inputs) {
    const res = await infer({ model, inputs });
    if (res.error) throw new Error(`${model}: ${res.error}`);
    return res.outputs[0];
  }

  async read(image) {
    let decoded;
    try {
      decoded = await sharp(image).removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
    } catch (err) {
      throw new Error(`cannot decode the image (PNG or JPEG expected): ${err.message}`);
    }
    const { data: rgb, info } = decoded;
    const { width: w, height: h } = info;
    // Detection input: longest side at most `limit`, both sides multiples of 32.
    const ratio = Math.min(1, this.limit / Math.max(w, h));
    const dw = Math.max(32, Math.round((w * ratio) / 32) * 32);
    const dh = Math.max(32, Math.round((h * ratio) / 32) * 32);
    const det = await this.call('ppocr_det', [tensor('x', 'FP32', [1, 3, dh, dw], toChw(await resizeRgb(rgb, w, h, dw, dh), dw, dh, DET_MEAN, DET_STD))]);
    const boxes = dbBoxes(det.data, dw, dh, this.db)
      .map((b) => {
        const x0 = Math.max(0, Math.floor((b.x0 * w) / dw));
        const y0 = Math.max(0, Math.floor((b.y0 * h) / dh));
        const x1 = Math.min(w, Math.ceil((b.x1 * w) / dw));
        const y1 = Math.min(h, Math.ceil((b.y1 * h) / dh));
        return { x0, y0, x1, y1 };
      })
      .filter((b) => b.x1 - b.x0 >= 4 && b.y1 - b.y0 >= 4)
      .sort((a, b) => (Math.abs(a.y0 - b.y0) < 10 ? a.x0 - b.x0 : a.y0 - b.y0));
    return Promise.all(boxes.map((b) => this.readLine(rgb, w, h, b)));
  }

  async readLine(rgb, w, h, b) {
    const cw = b.x1 - b.x0;
    const ch = b.y1 - b.y0;
    let crop = await sharp(rgb, { raw: { width: w, height: h, channels: 3 } }).extract({ left: b.x0, top: b.y0, width: cw, height: ch }).raw().toBuffer();
    const half = [0.5, 0.5, 0.5];
    // Direction: a 48x192 view of the line, padded on the right.
    const clsW = Math.min(CLS_WIDTH, Math.max(1, Math.ceil((REC_HEIGHT * cw) / ch)));
    const clsIn = toChw(await resizeRgb(crop, cw, ch, clsW, REC_HEIGHT), clsW, REC_HEIGHT, half, half, CLS_WIDTH);
    const cls = await this.call('ppocr_cls', [tensor('x', 'FP32', [1, 3, REC_HEIGHT, CLS_WIDTH], clsIn)]);
    if (cls.data[1] > cls.data[0] && cls.data[1] > this.clsThresh) {
      crop = await sharp(crop, { raw: { width: cw, height: ch, channels: 3 } }).rotate(180).raw().toBuffer();
    }
    // Recognition at height 48, width kept in proportion (a multiple of 8: one step per 8 pixels).
    const rw = Math.max(8, Math.min(2048, Math.ceil((REC_HEIGHT * cw) / ch / 8) * 8));
    const recIn = toChw(await resizeRgb(crop, cw, ch, rw, REC_HEIGHT), rw, REC_HEIGHT, half, half);
    const rec = await this.call('ppocr_rec', [tensor('x', 'FP32', [1, 3, REC_HEIGHT, rw], recIn)]);
    const [, steps, classes] = rec.shape;
    const { idx, val } = argmaxRows(rec.data, steps, classes);
    let text = '';
    let sum = 0;
    let n = 0;
    for (let t = 0; t < steps; t++) {
      if (idx[t] === 0 || (t > 0 && idx[t] === idx[t - 1])) continue;
      text += this.charset[idx[t]] ?? '';
      sum += val[t];
      n++;
    }
    return { text, box: [b.x0, b.y0, b.x1, b.y1], score: n ? sum / n : 0 };
  }
}
