import { createReadStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { consecutiveGroups } from '../stats.ts';

/**
 * The WAL of a wide dataset split into per-minute line sets in one streaming pass (issue 30 A11, the
 * last resort of a flush: src/storage/files/parquetWriter.ts writeFromLines). Each minute's lines go into
 * step files whose estimated flush cost (stepCost) stays within the storage DuckDB's memory, so each
 * Parquet file the flush writes is converted from lines that fit, and no DuckDB range filter ever
 * scans the whole WAL per partition (that filter alone ran out of memory at 85 MiB).
 */

const MiB = 1024 * 1024;
/**
 * What DuckDB holds whatever the rows (its buffers, the Parquet writer): 300 columns of short strings
 * flushed by lines at 85 MiB in 75 rows and not in 100; fitted to the runs in docs/memory.md.
 */
export const STEP_FIXED_BYTES = 40 * MiB;
/** What one cell costs the lines path (a JSON value extracted, cast, buffered for its column). */
export const STEP_CELL_BYTES = 2048;
/** What one byte of a WAL line costs it on top (the parsed document, the strings cut from it). */
export const STEP_LINE_FACTOR = 32;

/**
 * The memory one line costs a flush by lines: `columns × 2 KiB + 32 × its bytes` (docs/memory.md
 * "Wide datasets"). A step holds lines while their sum stays within stepBudget.
 */
export function lineCost(columns: number, lineBytes: number): number {
  return columns * STEP_CELL_BYTES + STEP_LINE_FACTOR * lineBytes;
}

/** The memory a step's lines may cost: the storage DuckDB's memory limit less what it holds anyway. */
export function stepBudget(memoryLimitBytes: number): number {
  return Math.max(0, memoryLimitBytes - STEP_FIXED_BYTES);
}

/** One step file: lines of one minute (or of lines whose time could not be read here: `minuteMs` NaN). */
export interface LineStep {
  path: string;
  minuteMs: number;
  rows: number;
  /** Sum of lineCost over its lines. */
  cost: number;
}

const MINUTE_MS = 60_000;

/**
 * The minute a WAL line's time value falls in, as DuckDB casts it to TIMESTAMP (ISO 8601 text, UTC
 * when no offset is given), or NaN when it is no such text: those lines go to steps of their own and
 * DuckDB reads them as it always does (the file's partition comes from its rows' written times).
 */
export function minuteOf(value: unknown): number {
  if (typeof value !== 'string') return NaN;
  const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})/.exec(value);
  if (!m) return NaN;
  const zoned = /(?:Z|[+-]\d{2}(?::?\d{2})?)$/i.test(value.slice(16));
  const ms = zoned ? Date.parse(value.replace(' ', 'T')) : Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]));
  return Number.isFinite(ms) ? Math.floor(ms / MINUTE_MS) * MINUTE_MS : NaN;
}

/** The time value of a line, undefined for a commit marker or a line without one (dropped as every reader drops it). */
function timeOf(line: string, timeColumn: string): { skip: boolean; minuteMs: number } {
  let row: unknown;
  try {
    row = JSON.parse(line);
  } catch {
    // Damaged bytes: kept, so DuckDB fails on them as on every other path (the flush salvages the segment).
    return { skip: false, minuteMs: NaN };
  }
  const value = row !== null && typeof row === 'object' ? (row as Record<string, unknown>)[timeColumn] : undefined;
  if (value === undefined || value === null) return { skip: true, minuteMs: NaN };
  return { skip: false, minuteMs: minuteOf(value) };
}

/** Lines waiting to be appended to their step file: written out when all buffers together pass this. */
const BUFFERED_BYTES = 4 * MiB;

class StepWriter {
  readonly steps: LineStep[] = [];
  private readonly open = new Map<number, { step: LineStep; lines: string[] }>();
  private buffered = 0;

  constructor(
    private readonly dir: string,
    private readonly budget: number,
  ) {}

  async add(minuteMs: number, line: string, cost: number): Promise<void> {
    const key = Number.isNaN(minuteMs) ? -Infinity : minuteMs;
    let cur = this.open.get(key);
    if (!cur || (cur.step.rows > 0 && cur.step.cost + cost > this.budget)) {
      if (cur) await this.write(cur);
      cur = { step: { path: path.join(this.dir, `step-${this.steps.length}.ndjson`), minuteMs, rows: 0, cost: 0 }, lines: [] };
      this.steps.push(cur.step);
      this.open.set(key, cur);
    }
    cur.lines.push(line);
    cur.step.rows++;
    cur.step.cost += cost;
    this.buffered += line.length + 1;
    if (this.buffered >= BUFFERED_BYTES) await this.writeAll();
  }

  async writeAll(): Promise<void> {
    for (const cur of this.open.values()) await this.write(cur);
    this.buffered = 0;
  }

  private async write(cur: { step: LineStep; lines: string[] }): Promise<void> {
    if (!cur.lines.length) return;
    const text = `${cur.lines.join('\n')}\n`;
    cur.lines = [];
    await fs.appendFile(cur.step.path, text);
  }
}

/**
 * Reads `segmentPaths` line by line once and writes each line with a time into a step file of its
 * minute under `dir`; a minute's lines go to further step files once a step's cost would pass
 * `budget` (a step holds at least one line). Memory: one line, and up to BUFFERED_BYTES of lines.
 */
export async function splitWalLines(segmentPaths: string[], timeColumn: string, columns: number, budget: number, dir: string): Promise<LineStep[]> {
  await fs.mkdir(dir, { recursive: true });
  const writer = new StepWriter(dir, budget);
  for (const file of segmentPaths) {
    const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line.trim()) continue;
      const { skip, minuteMs } = timeOf(line, timeColumn);
      if (skip) continue;
      await writer.add(minuteMs, line, lineCost(columns, Buffer.byteLength(line)));
    }
  }
  await writer.writeAll();
  return writer.steps;
}

/**
 * A partition's steps in groups, each the lines of one Parquet file: consecutive steps while their
 * cost together stays within `budget` (a group holds at least one step).
 */
export function groupSteps(steps: LineStep[], budget: number): LineStep[][] {
  return consecutiveGroups(steps, (s) => s.cost, budget);
}

/** A step file's lines in two new step files (a step that still ran out of memory), or undefined for a single line. */
export async function halveStep(step: LineStep): Promise<[LineStep, LineStep] | undefined> {
  if (step.rows < 2) return undefined;
  const lines = (await fs.readFile(step.path, 'utf8')).split('\n').filter((l) => l.length > 0);
  const half = Math.ceil(lines.length / 2);
  const parts = [lines.slice(0, half), lines.slice(half)];
  const out = await Promise.all(
    parts.map(async (p, i) => {
      const file = `${step.path.replace(/\.ndjson$/, '')}-${i}.ndjson`;
      await fs.writeFile(file, `${p.join('\n')}\n`);
      return { path: file, minuteMs: step.minuteMs, rows: p.length, cost: (step.cost * p.length) / lines.length };
    }),
  );
  return [out[0], out[1]];
}
