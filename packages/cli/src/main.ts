/** @module The `triode` command: argv in, options out, nothing else reads process.argv or env. */
import { Command } from 'commander';
import { addServeFlags, toServeOptions } from './serve-options.js';
import { startServe } from './serve.js';
import { addClusterCommands } from './cluster.js';
import { addPerfCommand } from './perf.js';

/** Runs the CLI; resolves to an exit code (or never, for a running server). */
export async function main(argv: string[]): Promise<number | undefined> {
  const program = new Command()
    .name('triode')
    .description('A Triton-compatible inference server in TypeScript')
    .version('0.1.0')
    .showHelpAfterError();

  let result: number | undefined = 0;
  const long = ['serve', 'gateway', 'worker'];
  if (long.includes(argv[0] ?? '')) result = undefined;
  addServeFlags(program.command('serve').description('serve a model repository in one process (embedded mode)'))
    .action(async (o: Record<string, unknown>) => {
      const opts = toServeOptions(o);
      const running = await startServe(opts);
      result = undefined;
      const stop = (signal: string) => {
        process.stderr.write(`Received ${signal}, shutting down\n`);
        running.shutdown().then(() => process.exit(0), (err: unknown) => {
          process.stderr.write(`shutdown failed: ${String(err)}\n`);
          process.exit(1);
        });
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
  addClusterCommands(program);
  addPerfCommand(program, (code) => { result = code; });
  await program.parseAsync(argv, { from: 'user' });
  return result;
}
