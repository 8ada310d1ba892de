import { describe, expect, it } from 'vitest';
import { TraceSettings } from './trace-settings.js';

describe('TraceSettings', () => {
  it('takes known settings, globally and per model, and a reset goes back to the global value', () => {
    const t = new TraceSettings();
    expect(t.update({ trace_rate: '5', trace_level: ['TIMESTAMPS'] })).toMatchObject({ trace_rate: '5', trace_level: ['TIMESTAMPS'] });
    expect(t.active).toBe(true);
    t.update({ trace_count: '-1', log_frequency: '4294967295' }, 'm');
    expect(t.get('m')).toMatchObject({ trace_rate: '5', trace_count: '-1', log_frequency: '4294967295' });
    t.update({ log_frequency: null }, 'm');
    expect(t.get('m')['log_frequency']).toBe('0');
  });

  it('attack: names every object has (constructor, toString, __proto__) are unknown settings, and nothing is stored', () => {
    const t = new TraceSettings();
    const before = t.get();
    for (const k of ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__']) {
      expect(() => t.update(JSON.parse(`{"${k}": "7"}`) as Record<string, unknown>), k).toThrow(`unknown trace setting '${k}'`);
    }
    expect(t.get()).toEqual(before);
  });

  it('attack: integer settings out of their range are refused', () => {
    const t = new TraceSettings();
    expect(() => t.update({ trace_count: '99999999999999999999999' })).toThrow("'trace_count' must be in [-1, 2147483647]");
    expect(() => t.update({ trace_count: '-2' })).toThrow("'trace_count' must be in [-1, 2147483647]");
    expect(() => t.update({ log_frequency: '-1' })).toThrow("'log_frequency' must be in [0, 4294967295]");
    expect(() => t.update({ trace_rate: '4294967296' })).toThrow("'trace_rate' must be in [0, 4294967295]");
    expect(t.get()).toMatchObject({ trace_count: '-1', log_frequency: '0', trace_rate: '1000' });
  });
});
