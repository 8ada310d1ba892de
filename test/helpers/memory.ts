/**
 * Runs `f` and measures how far this process's memory (the server's, when it runs in the test's
 * process) rose: the peak RSS the kernel recorded and the RSS and ArrayBuffer memory sampled every
 * few ms, over the start.
 */
export async function memoryGrowth<T>(f: () => Promise<T>): Promise<{ result: T; grownBytes: number }> {
  const start = process.memoryUsage();
  const startMaxRss = process.resourceUsage().maxRSS * 1024;
  let peak = 0;
  const sample = () => {
    const m = process.memoryUsage();
    peak = Math.max(peak, m.rss - start.rss, m.arrayBuffers - start.arrayBuffers);
  };
  const timer = setInterval(sample, 5);
  try {
    const result = await f();
    sample();
    return { result, grownBytes: Math.max(peak, process.resourceUsage().maxRSS * 1024 - startMaxRss) };
  } finally {
    clearInterval(timer);
  }
}
