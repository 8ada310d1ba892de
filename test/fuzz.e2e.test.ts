/**
 * The fuzz suite in CI (issue #14): a fixed seed and a fixed number of attack cases over HTTP and
 * gRPC against a `triode serve` child (explicit model control, every example loaded). Malformed
 * JSON, wrong shapes and types, huge dims, binary-header lies, chunked bodies, slowloris, truncated
 * and corrupt protobuf, resets, GOAWAY, cancel and deadline storms, hostile names and override
 * paths for the repository API. Fails on any crash, hang, 5xx without a cause, leaked internals or
 * file written outside the repository, printing the seed and a replay line per failure.
 * Longer runs: `node bench/fuzz.mjs --minutes N` (engine: test/fuzz/).
 */
import { describe, expect, it } from 'vitest';
import { classify } from './fuzz/classify.mjs';
import { formatSummary, runFuzz } from './fuzz/runner.mjs';

/** The seed and case count CI runs: a count, not a time budget, so every run sends the same bytes. */
const SEED = 14;
const CASES = 3000;

describe('fuzz suite (seeded, fixed count)', () => {
  it('its checks flag what they must: 5xx without a cause, JS internals, server paths, long echoes, hangs', () => {
    const types = (o: Parameters<typeof classify>[1], c = {}, request = '') => classify(c, o, request, ['/srv/repo']).map((f) => f.type);
    expect(types({ status: 500, body: '{"error":"x"}' })).toEqual(['unexplained-5xx']);
    expect(types({ status: 500, body: '{"error":"failed to load \'m\', failed to poll from model repository"}' })).toEqual(['explained-5xx']);
    expect(types({ status: 503, body: '{"error":"Cannot read properties of undefined (reading \'x\')"}' })).toEqual(['explained-5xx', 'leak']);
    expect(types({ status: 400, body: '{"error":"bad: /srv/repo/m/1/model.onnx"}' })).toEqual(['leak']);
    expect(types({ status: 400, body: JSON.stringify({ error: `unknown '${'q'.repeat(700)}'` }) }, {}, 'q'.repeat(700))).toEqual(['leak']);
    expect(types({ status: 400, body: JSON.stringify({ error: `unknown '${'q'.repeat(256)}...'` }) }, {}, 'q'.repeat(700))).toEqual([]);
    expect(types({ status: 404, body: '{"error":"no model \'/tmp/x\'"}' }, {}, 'GET /v2/models/%2Ftmp%2Fx\n/tmp/x')).toEqual([]);
    expect(types({ grpc: 13, message: 'Error deserializing request' }, { badBytes: true })).toEqual(['explained-5xx']);
    expect(types({ grpc: 13, message: 'oops' })).toEqual(['unexplained-5xx']);
    expect(types({ grpc: 2, message: 'x is not a function' }, { badBytes: true })).toEqual(['unexplained-5xx', 'leak']);
    expect(types({ grpc: 0, streamErrors: ['    at Object.<anonymous> (/x.js:1:2)'], streamResponses: 0 }, { expectResponses: 1 })).toEqual(['leak', 'drop']);
    expect(types({ hang: true })).toEqual(['hang']);
    expect(types({ closed: true })).toEqual(['drop']);
    expect(types({ closed: true }, { mayClose: true })).toEqual([]);
  });

  it(`seed ${SEED}, ${CASES} cases over HTTP and gRPC: no crash, hang, unexplained 5xx, leak or escape; RSS bounded`, async () => {
    const s = await runFuzz({ seed: SEED, protocol: 'all', cases: CASES });
    const report = formatSummary(s);
    console.log(report.slice(0, report.indexOf('\n\n', report.indexOf('by status:'))));
    expect(s.cases).toBe(CASES);
    // The cases reached the server and it answered both ways (a fuzzer that hits nothing proves nothing).
    expect(s.byStatus['http 200'] ?? 0, report).toBeGreaterThan(50);
    expect(s.byStatus['http 400'] ?? 0, report).toBeGreaterThan(200);
    expect(s.byStatus['grpc OK'] ?? 0, report).toBeGreaterThan(50);
    expect(s.byStatus['grpc INVALID_ARGUMENT'] ?? 0, report).toBeGreaterThan(50);
    expect(s.failures.map((f) => `case ${f.index} (${f.protocol} ${f.family}) ${f.desc}: ${f.detail.split('\n')[0]} -- replay: ${f.replay}`), report).toEqual([]);
    // Thousands of rejected requests must not leave memory behind (generous: allocator noise).
    expect(s.rss.endKb - s.rss.startKb, report).toBeLessThan(300 * 1024);
  }, 300_000);
});
