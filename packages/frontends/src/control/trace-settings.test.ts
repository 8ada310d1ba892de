import { describe, expect, it } from 'vitest';
import { TraceSettings } from './trace-settings.js';

describe('TraceSettings', () => {
  it('takes known settings, globally and per model, and a reset goes back to the global value', () => {
    const t = new TraceSettings({ trace_file: '/tmp/never-written.json' });
    expect(t.update({ trace_rate: '5', trace_level: ['TIMESTAMPS'] })).toMatchObject({ trace_rate: '5', trace_level: ['TIMESTAMPS'] });
    expect(t.active).toBe(true);
    t.update({ trace_count: '-1', log_frequency: '2147483647' }, 'm');
    expect(t.get('m')).toMatchObject({ trace_rate: '5', trace_count: '-1', log_frequency: '2147483647' });
    t.update({ log_frequency: null }, 'm');
    expect(t.get('m')['log_frequency']).toBe('0');
    // Levels are kept once each, in Triton's order.
    expect(t.update({ trace_level: ['TENSORS', 'TIMESTAMPS', 'TENSORS'] })['trace_level']).toEqual(['TIMESTAMPS', 'TENSORS']);
  });

  it('attack: names every object has (constructor, toString, __proto__) and keys Triton does not read are ignored, and nothing is stored', () => {
    const t = new TraceSettings();
    const before = t.get();
    for (const k of ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__', 'nope']) {
      expect(t.update(JSON.parse(`{"${k}": "7"}`) as Record<string, unknown>), k).toEqual(before);
    }
    expect(t.get()).toEqual(before);
    expect(Object.getPrototypeOf(t.get())).toBe(Object.prototype);
  });

  it('reports trace_mode as Triton does (always "triton" here); it is not a setting a client changes', () => {
    const t = new TraceSettings();
    expect(t.get()['trace_mode']).toBe('triton');
    expect(t.update({ trace_mode: 'opentelemetry' })['trace_mode']).toBe('triton');
    expect(t.get('m')['trace_mode']).toBe('triton');
  });

  it('refuses settings that would trace but cannot, with Triton\'s words, and changes nothing (review: rate 0 traced every request, a level with no file traced none, both answered 200)', () => {
    const noFile = new TraceSettings();
    expect(() => noFile.update({ trace_level: ['TIMESTAMPS'] })).toThrow('Attempting to set invalid trace setting :trace file name is not given');
    expect(() => noFile.update({ trace_level: ['TIMESTAMPS'] }, 'm')).toThrow('Attempting to set invalid trace setting :trace file name is not given');
    expect(noFile.get()['trace_level']).toEqual(['OFF']);
    expect(noFile.get('m')['trace_level']).toEqual(['OFF']);
    expect(noFile.active).toBe(false);
    const t = new TraceSettings({ trace_file: '/tmp/never-written.json' });
    expect(() => t.update({ trace_level: ['TIMESTAMPS'], trace_rate: '0' })).toThrow('Attempting to set invalid trace setting :sample rate must be non-zero');
    expect(t.get()).toMatchObject({ trace_level: ['OFF'], trace_rate: '1000' });
    t.update({ trace_level: ['TIMESTAMPS'] });
    expect(() => t.update({ trace_rate: '0' }, 'm')).toThrow('Attempting to set invalid trace setting :sample rate must be non-zero');
    expect(t.get('m')['trace_rate']).toBe('1000');
    // Settings that do not trace are always taken, as Triton allows.
    expect(t.update({ trace_level: ['OFF'], trace_rate: '0' })).toMatchObject({ trace_level: ['OFF'], trace_rate: '0' });
    expect(new TraceSettings().update({ trace_rate: '0' })['trace_rate']).toBe('0');
  });

  it('attack: integer settings out of their range, or not integers, are refused with Triton\'s words (std::stoi: int32, whatever the setting\'s type)', () => {
    const t = new TraceSettings();
    // Triton: stoi's out_of_range, with the setting's own range in the words (trace_count's is [ -1, int32 max ]).
    expect(() => t.update({ trace_count: '99999999999999999999999' })).toThrow("Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 99999999999999999999999");
    expect(() => t.update({ trace_count: '-3000000000' })).toThrow("Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: -3000000000");
    expect(() => t.update({ trace_rate: '4294967295' })).toThrow("Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 4294967295");
    expect(() => t.update({ log_frequency: '2147483648' })).toThrow("Unable to parse 'log_frequency', value is out of range [ 0, 4294967295 ], got: 2147483648");
    // HTTP writes no space after 'got:' here (http_server.cc HandleTrace); gRPC does (grpc_server.cc).
    expect(() => t.update({ trace_count: '-2' })).toThrow("Unable to parse 'trace_count'. Expecting value >= -1, got:-2");
    expect(() => t.update({ trace_count: ['-2'] }, undefined, 'grpc')).toThrow("Unable to parse 'trace_count'. Expecting value >= -1, got: -2");
    // What Triton would take as something else than was sent is refused: a wrapped negative, trailing characters.
    expect(() => t.update({ log_frequency: '-1' })).toThrow("Unable to parse 'log_frequency', value is out of range [ 0, 4294967295 ], got: -1");
    expect(() => t.update({ trace_rate: '12abc' })).toThrow("Unable to parse 'trace_rate', got: 12abc");
    expect(() => t.update({ trace_rate: 'often' })).toThrow("Unable to parse 'trace_rate', got: often");
    expect(t.get()).toMatchObject({ trace_count: '-1', log_frequency: '0', trace_rate: '1000' });
    // stoi takes leading white space and a sign.
    expect(t.update({ trace_rate: ' +5', trace_count: '\t-1' })).toMatchObject({ trace_rate: '5', trace_count: '-1' });
  });

  it('HTTP values of the wrong JSON type get TritonJson\'s words (before: Triode\'s own)', () => {
    const t = new TraceSettings();
    expect(() => t.update({ trace_rate: 5 })).toThrow('attempt to access JSON non-string as string');
    expect(() => t.update({ log_frequency: true })).toThrow('attempt to access JSON non-string as string');
    expect(() => t.update({ trace_level: 'TIMESTAMPS' })).toThrow('attempt to access JSON non-array as array');
    expect(() => t.update({ trace_level: [1] })).toThrow('attempt to access JSON non-string as string');
    // A level name Triton does not know (it ignores it) is refused.
    expect(() => t.update({ trace_level: ['LOUD'] })).toThrow("'trace_level' must be a list of OFF, TIMESTAMPS, TENSORS, got: LOUD");
  });

  it('checks the fields in Triton\'s order (trace_level, trace_rate, trace_count, log_frequency), whatever the order sent (before: the order sent)', () => {
    const t = new TraceSettings();
    expect(() => t.update({ log_frequency: 'x', trace_count: 'y', trace_rate: 'z', trace_level: ['OFF', 'TIMESTAMPS'] })).toThrow("Expect only one trace level 'OFF' is specified");
    expect(() => t.update({ log_frequency: 'x', trace_count: 'y', trace_rate: 'z' })).toThrow("Unable to parse 'trace_rate', got: z");
    // gRPC: a list for a single-valued setting is refused at its turn, after the settings Triton reads before it.
    expect(() => t.update({ trace_rate: ['1', '2'], trace_level: ['OFF', 'TIMESTAMPS'] }, undefined, 'grpc')).toThrow("Expect only one trace level 'OFF' is specified");
    expect(() => t.update({ log_frequency: ['1', '2'], trace_rate: ['x'] }, undefined, 'grpc')).toThrow("Unable to parse 'trace_rate', got: x");
    expect(() => t.update({ log_frequency: ['1', '2'], trace_rate: ['3'] }, undefined, 'grpc')).toThrow("expect only 1 value for 'log_frequency'");
    expect(t.get()['trace_rate']).toBe('1000');
  });

  it('null clears a global setting back to its start-up value, as Triton\'s global_default_ (before: Triode\'s defaults)', () => {
    const t = new TraceSettings({ trace_file: '/tmp/never-written.json', trace_level: ['TIMESTAMPS'], trace_rate: '7', trace_count: '20' });
    t.update({ trace_rate: '9', trace_level: ['OFF'], trace_count: '3' });
    expect(t.update({ trace_rate: null, trace_level: null, trace_count: null })).toMatchObject({ trace_rate: '7', trace_level: ['TIMESTAMPS'], trace_count: '20', log_frequency: '0' });
    // gRPC clears with an empty list.
    t.update({ trace_rate: ['9'] }, undefined, 'grpc');
    expect(t.update({ trace_rate: [] }, undefined, 'grpc')['trace_rate']).toBe('7');
  });

  it('a model whose own settings are all cleared follows the global ones again, sampled with them (Triton drops its setting)', () => {
    const t = new TraceSettings();
    t.update({ trace_count: '3', trace_rate: '5' }, 'm');
    expect(t.scope('m').key).toBe('m');
    t.update({ trace_count: null }, 'm');
    expect(t.scope('m').key).toBe('m');
    t.update({ trace_rate: null }, 'm');
    expect(t.scope('m').key).toBe('');
    // An update with nothing in it gives a model no setting of its own.
    t.update({}, 'n');
    expect(t.scope('n').key).toBe('');
  });

  it("keeps the trace_count left per scope as Triton's count_: reported by get, kept by an update of another field once a client set it, else back to the start-up value", () => {
    const t = new TraceSettings({ trace_count: '5' });
    const left = (m?: string) => t.get(m)['trace_count'];
    expect([t.takeCount(''), t.takeCount('')]).toEqual([true, true]);
    expect(left()).toBe('3');
    // Not set by a client (count_specified_ false): another field's update starts from the start-up value.
    t.update({ trace_rate: '7' });
    expect(left()).toBe('5');
    t.update({ trace_count: '4' });
    t.takeCount('');
    t.update({ trace_rate: '8' });
    expect(left()).toBe('3');
    // A model with settings of its own but no count starts from what the global scope has left, and counts apart.
    t.update({ trace_rate: '2' }, 'm');
    expect(left('m')).toBe('3');
    t.takeCount('m');
    expect([left('m'), left()]).toEqual(['2', '3']);
    // A global update makes it again from the global count left; a model's own count stays.
    t.update({ log_frequency: '1' });
    expect(left('m')).toBe('3');
    t.update({ trace_count: '1' }, 'n');
    t.takeCount('n');
    expect(t.takeCount('n')).toBe(false);
    t.update({ log_frequency: '2' });
    expect(left('n')).toBe('0');
    // A count given back under settings that have changed since is not given back.
    const scope = t.scope('m');
    t.takeCount('m');
    t.update({ trace_rate: '3' }, 'm');
    expect(left('m')).toBe('3');
    t.giveBackCount('m', scope);
    expect(left('m')).toBe('3');
    t.giveBackCount('m', t.scope('m'));
    expect(left('m')).toBe('4');
  });
});
