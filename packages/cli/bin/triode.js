#!/usr/bin/env -S node --initial-old-space-size=128
// The flag: a server's tensors are off-heap buffers, and V8 counts them against a small old
// generation, so a default heap runs a full collection every few dozen 110 KB requests; starting
// the old generation at 128 MB cut the cluster's collections ~4x and raised its throughput ~30%
// (bench/RESULTS.md, issue #6). `node packages/cli/bin/triode.js` skips the shebang: pass the flag
// yourself there (the Dockerfile does).
import { main } from '../dist/main.js';

main(process.argv.slice(2)).then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  (err) => { console.error(err instanceof Error ? err.message : String(err)); process.exit(1); },
);
