// Sends one HTTP case over a raw socket and reads what comes back: the status, the body, or that
// the server closed without answering, or that it did neither in time (a hang).
import { connect } from 'node:net';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Parses a raw HTTP/1.1 response: status, headers, body (de-chunked); undefined while incomplete. */
export function parseResponse(buf, final) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = buf.subarray(0, end).toString('latin1');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
  if (!m) return { status: -1, body: buf.toString('latin1').slice(0, 2000) };
  const status = Number(m[1]);
  if (status === 100) return parseResponse(buf.subarray(end + 4), final);
  const rest = buf.subarray(end + 4);
  const cl = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (cl) return rest.byteLength >= Number(cl[1]) ? { status, body: rest.subarray(0, Number(cl[1])).toString('utf8') } : (final ? { status, body: rest.toString('utf8'), truncated: true } : undefined);
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
    const out = [];
    let at = 0;
    for (;;) {
      const eol = rest.indexOf('\r\n', at);
      if (eol < 0) return final ? { status, body: Buffer.concat(out).toString('utf8'), truncated: true } : undefined;
      const n = parseInt(rest.subarray(at, eol).toString('latin1'), 16);
      if (!(n >= 0)) return { status, body: Buffer.concat(out).toString('utf8'), truncated: true };
      if (n === 0) return { status, body: Buffer.concat(out).toString('utf8') };
      if (rest.byteLength < eol + 2 + n + 2) return final ? { status, body: Buffer.concat(out).toString('utf8'), truncated: true } : undefined;
      out.push(rest.subarray(eol + 2, eol + 2 + n));
      at = eol + 2 + n + 2;
    }
  }
  return final ? { status, body: rest.toString('utf8') } : (status === 204 || status === 304 ? { status, body: '' } : undefined);
}

/** Sends `bytes` (in `pieces`, `delayMs` apart) and resolves with the outcome within `hangMs`. */
export function exchange(port, c, hangMs) {
  return new Promise((resolve) => {
    const started = Date.now();
    const s = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let done = false;
    let hangTimer;
    const finish = (outcome) => {
      if (done) return;
      done = true;
      clearTimeout(hangTimer);
      s.destroy();
      resolve({ ...outcome, ms: Date.now() - started });
    };
    const armHang = () => {
      clearTimeout(hangTimer);
      hangTimer = setTimeout(() => finish({ hang: true, partial: buf.toString('latin1').slice(0, 300) }), hangMs);
    };
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const r = parseResponse(buf, false);
      if (r) finish(r);
    });
    s.on('error', () => { /* a reset counts as a close */ });
    s.on('close', () => {
      const r = parseResponse(buf, true);
      finish(r ?? { closed: true, partial: buf.toString('latin1').slice(0, 300) });
    });
    s.on('connect', async () => {
      const pieces = Math.max(1, Math.min(c.pieces ?? 1, c.bytes.byteLength));
      const step = Math.ceil(c.bytes.byteLength / pieces);
      for (let at = 0; at < c.bytes.byteLength && !done; at += step) {
        s.write(c.bytes.subarray(at, at + step));
        if (c.delayMs && at + step < c.bytes.byteLength) await sleep(c.delayMs);
      }
      if (done) return;
      if (c.endAfterMs !== undefined) {
        // The client gives up on a body it never finished: half-close, then the server must answer or close.
        await sleep(c.endAfterMs);
        if (!done) s.end();
      }
      armHang();
    });
    armHang();
  });
}

/** Holds `c.idle` connections that sent `c.prefix`, runs `c.bytes` meanwhile, then drops them. */
export async function idleExchange(port, c, hangMs) {
  const idle = [];
  for (let i = 0; i < c.idle; i++) {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.on('connect', () => { if (c.prefix.byteLength) s.write(c.prefix); });
    idle.push(s);
  }
  await sleep(50);
  const r = await exchange(port, c, hangMs);
  for (const s of idle) s.destroy();
  return r;
}
