/** A message as the envelope codec frames it (`[u32 LE length][JSON]`), from any JSON value: for tests that forge malformed ones. */
export function rawMessage(meta: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(meta));
  const b = Buffer.alloc(4 + json.byteLength);
  b.writeUInt32LE(json.byteLength, 0);
  json.copy(b, 4);
  return b;
}
