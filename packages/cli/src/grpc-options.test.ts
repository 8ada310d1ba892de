import { describe, expect, it } from 'vitest';
import { Command } from 'commander';
import { fileURLToPath } from 'node:url';
import { addGrpcFlags, toGrpcFlags } from './grpc-options.js';

const parse = (args: string[]) => {
  const cmd = addGrpcFlags(new Command().exitOverride());
  cmd.parse(args, { from: 'user' });
  return toGrpcFlags(cmd.opts());
};
const fixture = (f: string) => fileURLToPath(new URL(`../../../test/fixtures/tls/${f}`, import.meta.url));

describe('gRPC flags', () => {
  it("Triton's defaults", () => {
    const f = parse([]);
    expect(f.allow).toBe(true);
    expect(f.server.address).toBe('0.0.0.0:8001');
    expect(f.server.keepalive).toEqual({ timeMs: 7200000, timeoutMs: 20000, permitWithoutCalls: false, maxPingsWithoutData: 2, minRecvPingIntervalWithoutDataMs: 300000, maxPingStrikes: 2 });
    expect(f.server.tls).toBeUndefined();
    expect(f.responseCompression).toBe('none');
  });

  it('address, keepalive, restricted protocols, TLS files', () => {
    const f = parse(['--grpc-address', '127.0.0.1', '--grpc-port', '9001', '--grpc-keepalive-time', '10000', '--grpc-restricted-protocol', 'inference,health:key=v',
      '--grpc-use-ssl', 'true', '--grpc-server-cert', fixture('server.crt'), '--grpc-server-key', fixture('server.key')]);
    expect(f.server.address).toBe('127.0.0.1:9001');
    expect(f.server.keepalive?.timeMs).toBe(10000);
    expect([...f.server.restrictions!.entries()]).toEqual([['inference', { key: 'key', value: 'v' }], ['health', { key: 'key', value: 'v' }]]);
    expect(f.server.tls?.cert.toString()).toMatch(/BEGIN CERTIFICATE/);
    expect(f.server.tls?.mutual).toBe(false);
  });

  it('clear errors for a bad restriction and for TLS without its files', () => {
    expect(() => parse(['--grpc-restricted-protocol', 'nope:k=v'])).toThrow(/unknown restricted protocol 'nope'/);
    expect(() => parse(['--grpc-restricted-protocol', 'inference'])).toThrow(/<protocols>:<key>=<value>/);
    expect(() => parse(['--grpc-use-ssl', 'true'])).toThrow(/needs --grpc-server-cert and --grpc-server-key/);
    expect(() => parse(['--grpc-use-ssl-mutual', 'true', '--grpc-server-cert', fixture('server.crt'), '--grpc-server-key', fixture('server.key')])).toThrow(/needs --grpc-root-cert/);
  });
});

describe('--trace-config', () => {
  it("Triton's keys (with or without the triton, prefix) into trace settings; a bad key is named", async () => {
    const { parseTraceConfig } = await import('./serve-options.js');
    expect(parseTraceConfig(['triton,file=/tmp/t.json', 'level=TIMESTAMPS', 'rate=1', 'count=10', 'log_frequency=50'])).toEqual({
      trace_file: '/tmp/t.json', trace_level: ['TIMESTAMPS'], trace_rate: '1', trace_count: '10', log_frequency: '50',
    });
    expect(() => parseTraceConfig(['mode=opentelemetry'])).toThrow(/--trace-config expects/);
  });
});
