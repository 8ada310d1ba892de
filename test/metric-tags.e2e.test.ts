/**
 * End to end: `metric_tags` and `model_metrics` (issue #15 scope 3) against `triode serve` and a
 * cluster worker: a tagged model's series carry one "_" + key label per tag in every per-model
 * family, its first-response histogram has its own buckets, an untagged model keeps the
 * server-wide ones, and a model whose tag key is not a valid label name fails to load with the
 * reason while the others serve.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const FAMILY = 'nv_inference_first_response_histogram_ms';
const IDENTITY = `import { tensor } from 'triode';
export default class Identity {
  execute(requests) { return requests.map((r) => ({ outputs: [tensor('OUT', 'INT32', r.input('IN').shape, r.input('IN').data)] })); }
}
`;
// Decoupled: as in Triton, only decoupled models have the first-response histogram.
const DECOUPLED_IDENTITY = `import { tensor } from 'triode';
export default class Identity {
  execute(requests) { for (const r of requests) { r.sender.send({ outputs: [tensor('OUT', 'INT32', r.input('IN').shape, r.input('IN').data)] }); r.sender.close(); } }
}
`;
const DECOUPLED = 'model_transaction_policy { decoupled: true }\n';
const IO = 'input { name: "IN" data_type: TYPE_INT32 dims: [ 2 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 2 ] }\n';
const model = (name: string, config = ''): Record<string, string> => ({
  [`${name}/config.pbtxt`]: `name: "${name}"\nbackend: "javascript"\n${IO}${config}`,
  [`${name}/1/model.mjs`]: config.includes(DECOUPLED) ? DECOUPLED_IDENTITY : IDENTITY,
});
const REPO = {
  ...model('tagged', `${DECOUPLED}metric_tags [ { key: "team" value: "search" }, { key: "tier" value: "gold" } ]
model_metrics { metric_control [ { metric_identifier { family: "${FAMILY}" } histogram_options { buckets: [ 1, 2.5, 10000 ] } } ] }`),
  ...model('plain', DECOUPLED),
  ...model('other_family', 'model_metrics { metric_control { metric_identifier { family: "nv_inference_queue_duration_us" } } }'),
  ...model('bad_tag', 'metric_tags { key: "team-a" value: "x" }'),
  ...model('bad_buckets', `model_metrics { metric_control { metric_identifier { family: "${FAMILY}" } histogram_options { buckets: [ 5, 1 ] } } }`),
};
const TAGS = '_team="search",_tier="gold"';

let triode: Child;
let base: string;
let metricsUrl: string;

beforeAll(async () => {
  const [http, metrics] = [await freePort(), await freePort()];
  base = `http://127.0.0.1:${http}`;
  metricsUrl = `http://127.0.0.1:${metrics}/metrics`;
  triode = await startTriode(['serve', '--model-repository', makeRepository([], REPO), '--http-port', String(http), '--http-address', '127.0.0.1', '--allow-grpc=false',
    '--metrics-port', String(metrics), '--metrics-config', 'histogram_latencies=true', '--metrics-config', 'histogram_buckets=50,100']);
  await until(async () => (await fetch(metricsUrl)).ok);
});

afterAll(async () => {
  await triode?.stop();
});

/** One request to a decoupled model (generate_stream), read to its end. */
const infer = async (name: string) => {
  const r = await fetch(`${base}/v2/models/${name}/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: [1, 2] }) });
  await r.text();
  return r;
};
/** The `le` bounds and counts of one model's histogram series. */
const buckets = (text: string, labels: string) => [...text.matchAll(new RegExp(`^${FAMILY}_bucket\\{le="([^"]+)",${labels}\\} (\\d+)$`, 'gm'))].map((m) => [m[1], Number(m[2])]);

describe('metric_tags and model_metrics (triode serve)', () => {
  it('a tag key that is not a valid label name, and unsorted buckets, fail the load with the reason; the other models serve', async () => {
    const rows = new Map(((await (await fetch(`${base}/v2/repository/index`, { method: 'POST' })).json()) as { name: string; state: string; reason?: string }[]).map((r) => [r.name, r]));
    expect(rows.get('bad_tag')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: "model 'bad_tag': metric_tags key 'team-a' does not make a valid Prometheus label name '_team-a': a key must be letters, digits and underscores, and must not start with an underscore (labels starting with \"__\" are reserved)",
    });
    expect(rows.get('bad_buckets')).toMatchObject({ state: 'UNAVAILABLE', reason: `model 'bad_buckets': model_metrics buckets of '${FAMILY}' must be finite and strictly increasing, got [5, 1]` });
    for (const m of ['tagged', 'plain', 'other_family']) expect(rows.get(m)!.state).toBe('READY');
    // A family whose buckets cannot be set is ignored with a warning, as in Triton; the model loads.
    expect(triode.output()).toContain("model 'other_family': metric family 'nv_inference_queue_duration_us' in 'metric_identifier' is not a customizable metric");
    expect(triode.output()).not.toMatch(/metric_tags is not implemented|model_metrics is not implemented/);
  });

  it("every per-model family carries the tagged model's tags; the histogram uses its buckets, an untagged model the server-wide ones", async () => {
    for (let i = 0; i < 2; i++) expect((await infer('tagged')).status).toBe(200);
    expect((await infer('plain')).status).toBe(200);
    const text = await (await fetch(metricsUrl)).text();
    expect(text).toContain(`nv_inference_request_success{model="tagged",version="1",${TAGS}} 2\n`);
    expect(text).toContain('nv_inference_request_success{model="plain",version="1"} 1\n');
    expect(text).toContain(`nv_inference_request_failure{model="tagged",version="1",${TAGS},reason="BACKEND"} 0\n`);
    expect(text).toContain(`nv_inference_count{model="tagged",version="1",${TAGS}} 2\n`);
    expect(text).toMatch(new RegExp(`^nv_inference_exec_count\\{model="tagged",version="1",${TAGS}\\} 2$`, 'm'));
    expect(text).toContain(`nv_inference_pending_request_count{model="tagged",version="1",${TAGS}} 0\n`);
    for (const f of ['request', 'queue', 'compute_input', 'compute_infer', 'compute_output']) {
      expect(text).toMatch(new RegExp(`^nv_inference_${f}_duration_us\\{model="tagged",version="1",${TAGS}\\} \\d+$`, 'm'));
    }
    // One HELP/TYPE per family, whatever the label sets of its series.
    expect(text.match(new RegExp(`^# TYPE ${FAMILY} histogram$`, 'gm'))).toHaveLength(1);
    expect(buckets(text, `model="tagged",version="1",${TAGS}`).map(([le]) => le)).toEqual(['1', '2.5', '10000', '+Inf']);
    expect(buckets(text, `model="tagged",version="1",${TAGS}`).slice(2)).toEqual([['10000', 2], ['+Inf', 2]]);
    expect(text).toContain(`${FAMILY}_count{model="tagged",version="1",${TAGS}} 2\n`);
    expect(buckets(text, 'model="plain",version="1"')).toEqual([['50', 1], ['100', 1], ['+Inf', 1]]);
    // Nothing but the tagged model has tag labels.
    expect(text.match(/_team="search"/g)!.length).toBe(text.match(/model="tagged"/g)!.length);
  });
});

describe("a cluster worker's /metrics carries the tags", () => {
  let redis: RedisHandle | undefined;
  let worker: Child | undefined;
  afterAll(async () => {
    await worker?.stop();
    await redis?.stop();
  });

  it('the worker reports its tagged model with the tags (its source is the InferenceServer)', async () => {
    redis = await startRedis();
    const port = await freePort();
    worker = await startTriode(['worker', '--redis', redis.url, '--model-repository', makeRepository([], REPO), '--metrics-port', String(port), '--metrics-address', '127.0.0.1'], /Started worker/);
    let text = '';
    await until(async () => {
      text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return text.includes('model="tagged"');
    });
    expect(text).toContain(`nv_inference_request_success{model="tagged",version="1",${TAGS}} 0\n`);
    expect(text).toContain('nv_inference_request_success{model="plain",version="1"} 0\n');
    expect(worker.output()).toContain("metric_tags key 'team-a' does not make a valid Prometheus label name");
  });
});
