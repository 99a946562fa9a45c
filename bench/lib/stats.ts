export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile (p in 0..100) of unsorted values; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

/** Median plus the spread, so a reader sees how noisy a number was. */
export interface Repeated {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function repeated(runs: readonly number[]): Repeated {
  return { median: median(runs), min: Math.min(...runs), max: Math.max(...runs), runs: [...runs] };
}

export function round(value: number, digits = 0): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
