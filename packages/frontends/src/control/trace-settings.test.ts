import { describe, expect, it } from 'vitest';
import { TraceSettings } from './trace-settings.js';

describe('TraceSettings', () => {
  it('takes known settings, globally and per model, and a reset goes back to the global value', () => {
    const t = new TraceSettings({ trace_file: '/tmp/never-written.json' });
    expect(t.update({ trace_rate: '5', trace_level: ['TIMESTAMPS'] })).toMatchObject({ trace_rate: '5', trace_level: ['TIMESTAMPS'] });
    expect(t.active).toBe(true);
    t.update({ trace_count: '-1', log_frequency: '4294967295' }, 'm');
    expect(t.get('m')).toMatchObject({ trace_rate: '5', trace_count: '-1', log_frequency: '4294967295' });
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

  it('attack: integer settings out of their range, or not integers, are refused with Triton\'s words', () => {
    const t = new TraceSettings();
    expect(() => t.update({ trace_count: '99999999999999999999999' })).toThrow("Unable to parse 'trace_count', value is out of range [ -2147483648, 2147483647 ], got: 99999999999999999999999");
    expect(() => t.update({ trace_count: '-2' })).toThrow("Unable to parse 'trace_count'. Expecting value >= -1, got: -2");
    expect(() => t.update({ log_frequency: '-1' })).toThrow("Unable to parse 'log_frequency', value is out of range [ 0, 4294967295 ], got: -1");
    expect(() => t.update({ trace_rate: '4294967296' })).toThrow("Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 4294967296");
    expect(() => t.update({ trace_rate: 'often' })).toThrow("Unable to parse 'trace_rate', got: often");
    expect(t.get()).toMatchObject({ trace_count: '-1', log_frequency: '0', trace_rate: '1000' });
  });
});
