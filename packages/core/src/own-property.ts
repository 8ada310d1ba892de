/**
 * @module An own, enumerable property set by name, whatever the name: `obj[key] = v` with the key
 * "__proto__" would set the object's prototype instead (JSON.parse, by contrast, makes it an own
 * key). Used wherever a client's or a file's key names a property.
 */

/** Sets `obj[key] = value` as an own, enumerable, writable property, "__proto__" included. */
export function setOwn<T>(obj: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}
