/**
 * @module The cluster secret (`--cluster-secret`): Redis is shared infrastructure, not a trusted
 * party, so with a secret set, gateways and workers sign what they send each other through it
 * (requests, replies, control messages and their answers, the loaded set, registry entries, async
 * jobs) with HMAC-SHA256, and drop what is unsigned or wrongly signed. Each drop is counted (a
 * metric) and logged, at most one line per kind every 10 s.
 *
 * A MAC covers a kind (so a signed reply cannot pass for a control message) and each part with its
 * length (so parts cannot be shifted from one to the next). Parts are fed to the HMAC as they are:
 * a tensor is never copied to be signed. Without a secret nothing is signed or checked.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Logger } from '@triode/core';
import { RateLimitedWarning } from './rate-limited-warning.js';

/** What a MAC is for. */
export type SignedKind = 'request' | 'reply' | 'control' | 'control-reply' | 'desired' | 'registry' | 'direct-auth' | 'job' | 'job-result' | 'cancel' | 'fetch' | 'request-head';

/** Bytes of a MAC (SHA-256). */
export const MAC_BYTES = 32;

const SIGNED_TEXT = /^[0-9a-f]{64}\./;

/** Signs and checks what crosses Redis; a no-op without a secret. */
export class ClusterAuth {
  readonly #secret: Buffer | undefined;
  readonly #logger: Logger | undefined;
  /** Messages dropped, per kind, since start. */
  readonly rejected = new Map<SignedKind, number>();
  /** One rate-limited warning per kind of rejected message (at most one every 10 s each). */
  readonly #warnings = new Map<SignedKind, RateLimitedWarning>();

  /** @param secret the cluster secret; undefined or empty: nothing is signed or checked. */
  constructor(secret?: string, logger?: Logger) {
    this.#secret = secret ? Buffer.from(secret, 'utf8') : undefined;
    this.#logger = logger;
  }

  /** True when a secret is set. */
  get enabled(): boolean {
    return this.#secret !== undefined;
  }

  /** The MAC of `parts` for `kind`, or undefined without a secret. */
  mac(kind: SignedKind, parts: readonly (Uint8Array | string)[]): Buffer | undefined {
    if (!this.#secret) return undefined;
    const h = createHmac('sha256', this.#secret);
    h.update(kind);
    const len = Buffer.allocUnsafe(5);
    len[0] = 0;
    for (const p of parts) {
      len.writeUInt32BE(typeof p === 'string' ? Buffer.byteLength(p) : p.byteLength, 1);
      h.update(len);
      h.update(p);
    }
    return h.digest();
  }

  /**
   * True when `mac` is the MAC of `parts` (always true without a secret). A wrong or missing one
   * is counted and logged (rate-limited) as `what`.
   */
  verify(kind: SignedKind, parts: readonly (Uint8Array | string)[], mac: Uint8Array | undefined, what: string = kind): boolean {
    if (!this.#secret) return true;
    const want = this.mac(kind, parts)!;
    if (mac && mac.byteLength === MAC_BYTES && timingSafeEqual(want, mac)) return true;
    this.reject(kind, `${mac ? 'a wrongly signed' : 'an unsigned'} ${what}`);
    return false;
  }

  /** `text` with its MAC in front (`<hex>.<text>`), or `text` as it is without a secret. */
  signText(kind: SignedKind, text: string): string {
    const mac = this.mac(kind, [text]);
    return mac ? `${mac.toString('hex')}.${text}` : text;
  }

  /**
   * The text of what `signText` wrote, or undefined (counted, logged) when it is not signed with
   * the secret. Without a secret, a MAC in front is ignored.
   */
  openText(kind: SignedKind, signed: string, what: string = kind): string | undefined {
    const hasMac = SIGNED_TEXT.test(signed);
    const text = hasMac ? signed.slice(65) : signed;
    if (!this.#secret) return text;
    return this.verify(kind, [text], hasMac ? Buffer.from(signed.slice(0, 64), 'hex') : undefined, what) ? text : undefined;
  }

  /** Counts a dropped message and logs it, at most once per kind every 10 s (with how many were dropped since). */
  reject(kind: SignedKind, why: string): void {
    this.rejected.set(kind, (this.rejected.get(kind) ?? 0) + 1);
    let warning = this.#warnings.get(kind);
    if (!warning) this.#warnings.set(kind, (warning = new RateLimitedWarning(this.#logger)));
    warning.warn(`cluster: dropped ${why}`, ': check that every gateway and worker has the same --cluster-secret, and who else writes to this Redis');
  }
}

/** A Redis URL with its password (and user) hidden, for logs. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password && !u.username) return url;
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable Redis URL)';
  }
}
