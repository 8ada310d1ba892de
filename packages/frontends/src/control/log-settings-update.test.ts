import { describe, expect, it } from 'vitest';
import { LogSettings } from '@triode/core';
import { updateLogSettings } from './log-settings-update.js';

const refused = (update: Record<string, unknown>, protocol: 'http' | 'grpc', settings = new LogSettings()) => {
  try {
    updateLogSettings(settings, update, protocol);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
};

describe('updateLogSettings', () => {
  it("refuses a value of the wrong type with Triton's words for each protocol (HandleLogging: TritonJson's; RegisterLogging: 'expect <type> for ...')", () => {
    expect(refused({ log_warning: 'yes' }, 'http')).toBe('attempt to access JSON non-boolean as boolean');
    expect(refused({ log_warning: 'yes' }, 'grpc')).toBe("expect boolean for 'log_warning'");
    expect(refused({ log_error: undefined }, 'grpc')).toBe("expect boolean for 'log_error'");
    for (const v of [-1, 1.5, '2', true, 1e300]) expect(refused({ log_verbose_level: v }, 'http'), String(v)).toBe('attempt to access JSON non-unsigned-integer as unsigned-integer');
    expect(refused({ log_verbose_level: true }, 'grpc')).toBe("expect int32 for 'log_verbose_level'");
    expect(refused({ log_format: 1 }, 'http')).toBe('attempt to access JSON non-string as string');
    expect(refused({ log_format: false }, 'grpc')).toBe("expect string for 'log_format'");
    expect(refused({ log_format: 'json' }, 'http')).toBe('invalid argument for --log_format, got: json');
    expect(refused({ log_format: 'json' }, 'grpc')).toBe('invalid argument for log_format, got: json');
    // Past int32: Triton wraps it, Triode refuses.
    expect(refused({ log_verbose_level: 2 ** 31 }, 'grpc')).toBe("expect an integer in [0, 2147483647] for 'log_verbose_level'");
  });

  it("checks the fields in Triton's order, whatever the order sent, and a refused update changes nothing (before: the order sent)", () => {
    const settings = new LogSettings();
    const update = { log_format: 'json', log_verbose_level: -1, log_error: 1, log_warning: 1, log_info: 1, log_file: '/tmp/x' };
    expect(refused(update, 'http', settings)).toBe('log file location can not be updated through network protocol');
    delete (update as Record<string, unknown>)['log_file'];
    const expected = ["expect boolean for 'log_info'", "expect boolean for 'log_warning'", "expect boolean for 'log_error'", "expect int32 for 'log_verbose_level'", 'invalid argument for log_format, got: json'];
    for (const [i, k] of ['log_info', 'log_warning', 'log_error', 'log_verbose_level', 'log_format'].entries()) {
      expect(refused(update, 'grpc', settings)).toBe(expected[i]);
      (update as Record<string, unknown>)[k] = k === 'log_verbose_level' ? 3 : k === 'log_format' ? 'ISO8601' : false;
      if (i < 4) expect(settings.toJson()).toEqual(new LogSettings().toJson());
    }
    updateLogSettings(settings, update, 'grpc');
    expect(settings.toJson()).toMatchObject({ log_info: false, log_warning: false, log_error: false, log_verbose_level: 3, log_format: 'ISO8601' });
  });
});
