// Issue #18 scope 4: the bench scripts pin the server and the load generator to separate cores with
// `taskset` when the machine has >= 8 cores, and say so when it has not. One layout for all of them:
//  - server vs load generator (`pair`, the default shape), the layout of ../shared/PERF-BASELINE.md:
//    >= 8 cores: server on cpus 0-1, load generator (wrk, or a node client) on cpus 2-5;
//    2-7 cores: server on the upper half, load generator on the lower half (2 cores: server on
//    cpu 1, load generator on cpu 0: the server gets ONE core); 1 core or `--pin off`: unpinned.
//    `--pin split` (2-7 cores, for benches that support it): each server starts on two cpus, then
//    its main thread is moved to the last cpu alone and its other threads (instance threads, V8's)
//    to the one before it; the load generator gets the cpus below those, or with two cores shares
//    cpu 0 with the servers' other threads. The main thread has a core to itself and its process
//    a second one, which is what the issue's layout gives a Node server (server on 2 cores).
//  - a cluster (`{ cluster: { gateways, workers } }`, PERF-BASELINE.md finding 9), >= 16 cores and
//    enough for every role: Redis on cpu 0, each gateway on the next two cpus (1-2, then 3-4),
//    worker i on its own cpu after those, the load generator on the remaining cpus. With fewer
//    cores, or `--pin off`: unpinned.
// Cpu lists are strings as `taskset -c` takes them ('0-1', '5'); '' means unpinned.
//   import { layout, taskset, describe } from './pinning.mjs';
//   const pin = layout(availableParallelism(), args.pin);            // { server, load, ... }
//   spawn(...taskset(pin.server, [process.execPath, 'server.mjs']));  // ['taskset', ['-c', '0-1', node, ...]]
//   console.log(describe(pin, { server: 'server', load: 'wrk' }));
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { cpus } from 'node:os';

/** The cores the issue's server-vs-load-generator layout asks for (server 2, load generator 4 others). */
export const PAIR_CORES = 8;
/** The cores the cluster layout asks for (PERF-BASELINE.md finding 9 was taken on 16). */
export const CLUSTER_CORES = 16;

/** 'a-b', or 'a' when a === b. */
const range = (a, b) => (a === b ? String(a) : `${a}-${b}`);

/** How many cpus a list like '0-1', '5' or '0,2-3' names (0 for ''). */
export function cpuCount(list) {
  if (!list) return 0;
  return list.split(',').reduce((n, part) => { const [a, b = a] = part.split('-').map(Number); return n + b - a + 1; }, 0);
}

/**
 * The cpu lists for a bench's roles on a machine of `cores` cores; `pin` is the `--pin` value
 * ('auto' or 'off'; 'split' where `split` says the bench moves threads with splitThreads). shape 'pair': { server, load }; shape { cluster: { gateways, workers } }:
 * { redis, gateways: [...], workers: [...], load }. Always { shape, cores, pin, pinned, why }, where
 * `why` says why it is unpinned ('' when pinned).
 */
export function layout(cores, pin = 'auto', shape = 'pair', { split = false } = {}) {
  if (pin !== 'auto' && pin !== 'off' && !(pin === 'split' && split)) throw new Error(`--pin must be auto or off${split ? ' or split' : ''}, not ${pin}`);
  const base = { cores, pin, pinned: false, why: '' };
  if (shape === 'pair') {
    const unpinned = { ...base, shape: 'pair', server: '', load: '' };
    if (pin === 'off') return { ...unpinned, why: '--pin off' };
    if (pin === 'split') {
      if (cores < 2 || cores >= PAIR_CORES) throw new Error(`--pin split is for 2-7 cores; this machine has ${cores}`);
      const main = String(cores - 1), other = String(cores - 2);
      return { ...unpinned, pinned: true, split: { main, other }, server: range(cores - 2, cores - 1), load: cores === 2 ? '0' : range(0, cores - 3) };
    }
    if (cores >= PAIR_CORES) return { ...unpinned, pinned: true, server: '0-1', load: '2-5' };
    if (cores < 2) return { ...unpinned, why: `${cores} core` };
    const half = Math.floor(cores / 2);
    return { ...unpinned, pinned: true, server: range(half, cores - 1), load: range(0, half - 1) };
  }
  const { gateways = 1, workers = 1 } = shape.cluster;
  // Redis, two cpus per gateway, one per worker, and at least one left for the load generator.
  const need = Math.max(CLUSTER_CORES, 1 + 2 * gateways + workers + 1);
  const unpinned = { ...base, shape: 'cluster', need, redis: '', gateways: Array(gateways).fill(''), workers: Array(workers).fill(''), load: '' };
  if (pin === 'off') return { ...unpinned, why: '--pin off' };
  if (cores < need) return { ...unpinned, why: `${cores} cores, fewer than the ${need} this layout needs` };
  const firstWorker = 1 + 2 * gateways;
  return {
    ...unpinned, pinned: true, redis: '0',
    gateways: Array.from({ length: gateways }, (_, i) => range(1 + 2 * i, 2 + 2 * i)),
    workers: Array.from({ length: workers }, (_, i) => String(firstWorker + i)),
    load: range(firstWorker + workers, cores - 1),
  };
}

/**
 * `argv` run under `taskset -c cpus` as [command, args] for spawn/execFileSync; unchanged (split
 * the same way) when `cpus` is '' (unpinned).
 */
export function taskset(cpus, argv) {
  return cpus ? ['taskset', ['-c', cpus, ...argv]] : [argv[0], argv.slice(1)];
}

/**
 * One line on the layout for a bench's output. `names` name the roles in it: { server, load,
 * loadThreads } for a pair (e.g. { server: 'servers', load: 'wrk', loadThreads: 4 }); { load } for a
 * cluster. Says plainly when the machine has fewer cores than the issue's layout.
 */
export function describe(l, names = {}) {
  const load = names.load ?? 'load generator';
  if (l.shape === 'pair') {
    const server = names.server ?? 'server';
    const threads = names.loadThreads ? ` (${names.loadThreads} threads)` : '';
    const short = l.cores < PAIR_CORES && l.pin !== 'off' ? ` — fewer than ${PAIR_CORES} cores: not the issue's layout (server 2 cores, ${load} 4 others)` : '';
    if (!l.pinned) return `not pinned${l.pin === 'off' ? ' (--pin off)' : ''}: ${server} and ${load} share every core${short}`;
    if (l.split) return `split (--pin split): each of the ${server}' main thread alone on cpu ${l.split.main}, its other threads on cpu ${l.split.other}, ${load}${threads} on cpu ${l.load}${short}`;
    return `${server} on cpu ${l.server}, ${load}${threads} on cpu ${l.load}${short}`;
  }
  if (!l.pinned) return `not pinned (${l.why}): redis, gateway${l.gateways.length > 1 ? 's' : ''}, workers and ${load} share every core${l.why === '--pin off' ? '' : ' — not the issue\'s cluster layout'}`;
  return `redis on cpu ${l.redis}, ${l.gateways.map((g, i) => `gateway ${i + 1} on cpu ${g}`).join(', ')}, worker i on cpu ${l.workers[0]}+i (${range(Number(l.workers[0]), Number(l.workers.at(-1)))}), ${load} on cpu ${l.load}`;
}

/**
 * For `--pin split`: moves the main thread of `pid` to `split.main` and its other threads to
 * `split.other` (`taskset -p` per thread). Call it again before each measurement: a thread made
 * since takes the affinity of the thread that made it (the main thread's cpu, for a worker).
 */
export function splitThreads(pid, split) {
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      execFileSync('taskset', ['-p', '-c', tid === String(pid) ? split.main : split.other, tid], { stdio: 'ignore' });
    } catch { /* a thread that ended meanwhile */ }
  }
}

/** { cores, cpu, layout } for a bench's output and its results file. */
export function machine(l, names) {
  return { cores: l.cores, cpu: cpus()[0]?.model ?? 'unknown', layout: describe(l, names) };
}
