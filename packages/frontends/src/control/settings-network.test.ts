/**
 * Issue #14: the trace file and the log file are start-up options only. Over gRPC, TraceSetting
 * and LogSettings refuse them with UNIMPLEMENTED (Triton's UNSUPPORTED) and Triton's message.
 */
import { connect } from 'node:http2';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LogSettings, messageType, type Backplane } from '@triode/core';
import { startGrpcServer, type GrpcServerHandle } from '../grpc/grpc-server.js';
import { TraceSettings } from './trace-settings.js';
import { updateLogSettings } from './log-settings-update.js';

const dir = mkdtempSync(join(tmpdir(), 'triode-settings-'));
const traceFile = join(dir, 'trace.json');
const traces = new TraceSettings({ trace_file: traceFile, trace_level: ['TIMESTAMPS'] });
const logs = new LogSettings({ file: join(dir, 'triode.log') });
let grpc: GrpcServerHandle;

beforeAll(async () => {
  const backplane = { modelMetadata: async () => ({}), modelReady: async () => true } as unknown as Backplane;
  grpc = await startGrpcServer(backplane, { address: '127.0.0.1:0', traceSettings: traces, logSettings: logs });
});

afterAll(async () => {
  await grpc?.close(500);
});

/** One unary call over plain HTTP/2; resolves with its grpc-status and grpc-message. */
function call(method: string, type: string, message: Record<string, unknown>): Promise<{ status: number; message: string }> {
  const msg = Buffer.from(messageType(type).encode(message).finish());
  const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), msg]);
  frame.writeUInt32BE(msg.byteLength, 1);
  const session = connect(`http://127.0.0.1:${grpc.port}`);
  return new Promise((resolve, reject) => {
    const req = session.request({ ':method': 'POST', ':path': `/inference.GRPCInferenceService/${method}`, 'content-type': 'application/grpc', te: 'trailers' });
    let headers: Record<string, unknown> = {};
    req.on('response', (h) => { headers = { ...h }; });
    req.on('trailers', (t) => { headers = { ...headers, ...t }; });
    req.on('data', () => undefined);
    req.on('end', () => {
      session.close();
      resolve({ status: Number(headers['grpc-status']), message: decodeURIComponent(String(headers['grpc-message'] ?? '')) });
    });
    req.on('error', reject);
    req.end(frame);
  });
}

describe('start-up only file settings over gRPC', () => {
  it('TraceSetting with trace_file (global or per model) is UNIMPLEMENTED with Triton\'s message; the file stays', async () => {
    for (const model_name of ['', 'simple']) {
      const r = await call('TraceSetting', 'TraceSettingRequest', { model_name, settings: { trace_file: { value: [join(dir, 'elsewhere.json')] }, trace_rate: { value: ['1'] } } });
      expect(r).toEqual({ status: 12, message: 'trace file location can not be updated through network protocol' });
    }
    expect(traces.get()).toMatchObject({ trace_file: traceFile, trace_rate: '1000' });
    expect(existsSync(join(dir, 'elsewhere.json'))).toBe(false);
    // Other settings still change.
    expect((await call('TraceSetting', 'TraceSettingRequest', { settings: { trace_rate: { value: ['7'] } } })).status).toBe(0);
    expect(traces.get()['trace_rate']).toBe('7');
  });

  it('LogSettings with log_file is UNIMPLEMENTED with Triton\'s message; nothing changes', async () => {
    const r = await call('LogSettings', 'LogSettingsRequest', { settings: { log_file: { string_param: '/tmp/x.log' }, log_info: { bool_param: false } } });
    expect(r).toEqual({ status: 12, message: 'log file location can not be updated through network protocol' });
    expect(logs.log_info).toBe(true);
    expect(logs.log_file).toBe(join(dir, 'triode.log'));
  });

  it("LogSettings refuses a SettingValue of the wrong kind with Triton's words, in its order (RegisterLogging), and takes bool_param false", async () => {
    expect(await call('LogSettings', 'LogSettingsRequest', { settings: { log_format: { string_param: 'json' }, log_warning: { uint32_param: 1 } } }))
      .toEqual({ status: 3, message: "expect boolean for 'log_warning'" });
    expect(await call('LogSettings', 'LogSettingsRequest', { settings: { log_verbose_level: { string_param: '1' } } })).toEqual({ status: 3, message: "expect int32 for 'log_verbose_level'" });
    expect(await call('LogSettings', 'LogSettingsRequest', { settings: { log_format: { bool_param: true } } })).toEqual({ status: 3, message: "expect string for 'log_format'" });
    expect(await call('LogSettings', 'LogSettingsRequest', { settings: { log_format: { string_param: 'json' } } })).toEqual({ status: 3, message: 'invalid argument for log_format, got: json' });
    expect(await call('LogSettings', 'LogSettingsRequest', { settings: { log_error: {} } })).toEqual({ status: 3, message: "expect boolean for 'log_error'" });
    expect(logs.log_warning).toBe(true);
    expect((await call('LogSettings', 'LogSettingsRequest', { settings: { log_warning: { bool_param: false } } })).status).toBe(0);
    expect(logs.log_warning).toBe(false);
    logs.log_warning = true;
  });

  it('updateLogSettings refuses log_file even when it names the current file', () => {
    expect(() => updateLogSettings(logs, { log_file: logs.log_file })).toThrow(expect.objectContaining({ code: 'UNSUPPORTED' }) as Error);
  });
});
