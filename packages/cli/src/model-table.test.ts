import { describe, expect, it } from 'vitest';
import { gpuTable, modelTable } from './model-table.js';

describe('startup tables', () => {
  it("models: Triton's | Model | Version | Status |", () => {
    expect(modelTable([{ name: 'simple', version: '1', state: 'READY', reason: '' }, { name: 'gpu', version: '1', state: 'UNAVAILABLE', reason: 'no GPU' }])).toBe([
      '+--------+---------+---------------------+',
      '| Model  | Version | Status              |',
      '+--------+---------+---------------------+',
      '| simple | 1       | READY               |',
      '| gpu    | 1       | UNAVAILABLE: no GPU |',
      '+--------+---------+---------------------+',
    ].join('\n'));
  });

  it('a name with a newline or an escape sequence stays one escaped row', () => {
    const t = modelTable([{ name: 'nl\nname', version: '1', state: 'UNAVAILABLE', reason: 'bad \u001b[31mred' }]);
    expect(t.split('\n')).toHaveLength(5);
    expect(t).toContain('| nl\\u000aname | 1       | UNAVAILABLE: bad \\u001b[31mred |');
  });

  it('GPUs: index, CUDA id, name and memory', () => {
    const h100 = (i: number, cudaId: number) => ({ index: i, cudaId, uuid: `GPU-${i}`, name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: 81559 * 1024 * 1024, memoryUsedBytes: 0 });
    expect(gpuTable([h100(0, 0), h100(2, 1)])).toBe([
      '+-----+---------+-----------------------+-----------+',
      '| GPU | CUDA id | Name                  | Memory    |',
      '+-----+---------+-----------------------+-----------+',
      '| 0   | 0       | NVIDIA H100 80GB HBM3 | 81559 MiB |',
      '| 2   | 1       | NVIDIA H100 80GB HBM3 | 81559 MiB |',
      '+-----+---------+-----------------------+-----------+',
    ].join('\n'));
  });
});
