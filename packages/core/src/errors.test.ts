import { describe, expect, it } from 'vitest';
import { Errors, TriodeError, fromWireError, toWireError } from './errors.js';

describe('errors as data', () => {
  it('a queue timeout says it was rejected as data, not only in its message, across threads and Redis', () => {
    const e = Errors.requestTimeout();
    expect(e).toMatchObject({ code: 'UNAVAILABLE', message: 'Request timeout expired', rejected: true });
    const wire = toWireError(e);
    expect(wire).toEqual({ code: 'UNAVAILABLE', message: 'Request timeout expired', rejected: true });
    // As data (the cluster's envelope codec has its own test of the same crossing).
    expect(fromWireError(JSON.parse(JSON.stringify(wire)) as typeof wire).rejected).toBe(true);
    // The same text from anything else is not a rejection.
    expect(new TriodeError('UNAVAILABLE', 'Request timeout expired').rejected).toBe(false);
    expect(toWireError(Errors.unavailable('x'))).toEqual({ code: 'UNAVAILABLE', message: 'x' });
  });

  it('a lost instance says so as data across the instance thread; nothing else does', () => {
    const wire = toWireError(Errors.instanceLost('GPU 0 was lost'));
    expect(wire).toEqual({ code: 'UNAVAILABLE', message: 'GPU 0 was lost', instanceLost: true });
    expect(fromWireError(structuredClone(wire))).toMatchObject({ code: 'UNAVAILABLE', message: 'GPU 0 was lost', instanceLost: true, rejected: false });
    expect(new TriodeError('UNAVAILABLE', 'GPU 0 was lost').instanceLost).toBe(false);
    expect(toWireError(Errors.requestTimeout())).not.toHaveProperty('instanceLost');
  });

  it('keeps codes across a crossing; an unknown one reads as INTERNAL', () => {
    expect(fromWireError(toWireError(Errors.invalidArg('bad')))).toMatchObject({ code: 'INVALID_ARG', message: 'bad', rejected: false });
    expect(fromWireError({ code: 'NOPE', message: 'm' }).code).toBe('INTERNAL');
    expect(toWireError(new Error('plain'))).toEqual({ code: 'INTERNAL', message: 'plain' });
  });

  it('attack: a wire error whose message is not text never throws', () => {
    expect(fromWireError({ code: 'INTERNAL', message: { toString: 1 } }).message).toBe('(malformed error message: object)');
    expect(fromWireError({ message: null }).message).toBe('(malformed error message: null)');
    expect(fromWireError({ code: 'UNAVAILABLE', message: 42 })).toMatchObject({ code: 'UNAVAILABLE', message: '42' });
  });
});
