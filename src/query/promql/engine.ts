import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DomainError } from '../../errors.ts';

/**
 * Prometheus' PromQL engine (promql/, built by scripts/build-promql.ts as a native program), run as a
 * child process of the query worker process, started on the worker's first PromQL job and kept for the
 * next ones (SQL-only workers never start it). A native program, not WebAssembly in the worker: the
 * same Go code evaluated the bench's dashboard queries 4–5× faster natively (docs/promql.md).
 *
 * It only computes: it reads requests and series from its stdin and writes fetches and answers to its
 * stdout (frames: u32 length, kind byte, payload; see promql/main.go), with a seccomp filter that
 * refuses it any file, socket or program, and no environment but its thread count. It ends with its
 * worker (the parent-death signal, or the closed pipe), and the worker tells the pool its process id,
 * so that the pool's memory cap counts it and a query cut off kills both.
 */

/** Where the build puts the program (beside src/ and dist/). */
export const PROMQL_DIST = fileURLToPath(new URL('../../../promql-dist/', import.meta.url));

/** Why PromQL answers 503 on an install without the engine (built with Go, which it did not have). */
export const PROMQL_NOT_BUILT =
  'PromQL is not available on this install: its engine (promql-dist/promql) is built with Go, which was not found. Install Go 1.26+ and run `npm run build:promql` (or use the Docker image), then restart; SQL and every other endpoint work without it';

/**
 * Whether the engine is built (an install without Go serves everything but PromQL). Once found it is
 * not looked for again on every query (a program removed later fails the engine's start, said as such).
 */
let found = false;
export const promqlBuilt = (): boolean => (found ||= fs.existsSync(`${PROMQL_DIST}promql`));

/** Series for a fetch, as parts written in order (promqlStorage.ts encodeSeries). */
export type Fetch = (request: string) => Promise<Uint8Array[]>;
export type Evaluate = (request: string, fetch: Fetch) => Promise<string>;

const FRAME_REQUEST = 0x51; // 'Q'
const FRAME_SERIES = 0x53; // 'S'
const FRAME_FAILED = 0x45; // 'E'
const FRAME_FETCH = 0x46; // 'F'
const FRAME_ANSWER = 0x41; // 'A'

interface Job {
  fetch: Fetch;
  resolve: (json: string) => void;
  reject: (err: Error) => void;
}

class Engine {
  private readonly child: ChildProcess;
  private job: Job | undefined;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private ended: Error | undefined;

  constructor(binary: string, threads: string) {
    this.child = spawn(binary, [], { stdio: ['pipe', 'pipe', 'inherit'], env: { GOMAXPROCS: threads } });
    this.child.stdout!.on('data', (b: Buffer) => this.onData(b));
    // A write after the engine ended fails the job through 'exit'.
    this.child.stdin!.on('error', () => undefined);
    this.child.on('error', (err) => this.end(new DomainError('unavailable', `the PromQL engine could not start: ${err.message}`)));
    this.child.on('exit', (code, signal) => this.end(new DomainError('unavailable', `the PromQL engine stopped (${signal ?? `exit ${code}`})`)));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.ended;
  }

  evaluate(request: string, fetch: Fetch): Promise<string> {
    if (this.ended) return Promise.reject(this.ended);
    if (this.job) return Promise.reject(new Error('the PromQL engine is busy'));
    return new Promise<string>((resolve, reject) => {
      this.job = { fetch, resolve, reject };
      this.write(FRAME_REQUEST, [Buffer.from(request)]);
    });
  }

  private end(err: Error): void {
    if (this.ended) return;
    this.ended = err;
    const job = this.job;
    this.job = undefined;
    job?.reject(err);
  }

  private write(kind: number, parts: Uint8Array[]): void {
    const length = parts.reduce((a, p) => a + p.length, 0) + 1;
    const head = Buffer.alloc(5);
    head.writeUInt32LE(length, 0);
    head[4] = kind;
    const stdin = this.child.stdin!;
    stdin.write(head);
    for (const p of parts) stdin.write(p);
  }

  private onData(b: Buffer): void {
    this.chunks.push(b);
    this.buffered += b.length;
    for (;;) {
      if (this.buffered < 5) return;
      if (this.chunks[0].length < 5) this.chunks = [Buffer.concat(this.chunks)];
      const length = this.chunks[0].readUInt32LE(0);
      if (this.buffered < 4 + length) return;
      const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
      const kind = all[4];
      const payload = all.subarray(5, 4 + length);
      const rest = all.subarray(4 + length);
      this.chunks = rest.length ? [rest] : [];
      this.buffered = rest.length;
      this.onFrame(kind, payload);
    }
  }

  private onFrame(kind: number, payload: Buffer): void {
    const job = this.job;
    if (!job) return;
    if (kind === FRAME_ANSWER) {
      this.job = undefined;
      job.resolve(payload.toString('utf8'));
    } else if (kind === FRAME_FETCH) {
      job.fetch(payload.toString('utf8')).then(
        (parts) => this.job === job && this.write(FRAME_SERIES, parts),
        (err: Error) => this.job === job && this.write(FRAME_FAILED, [Buffer.from(err.message)]),
      );
    }
  }
}

let engine: Engine | undefined;

/**
 * The engine's entry point: a request (JSON) and the storage callback → the API's JSON answer. Starts
 * the engine process if none runs (`onStart` gets its process id); one that stopped is started again
 * for the next job.
 */
export function promqlEngine(onStart: (pid: number) => void): Evaluate {
  if (!engine?.alive) {
    const binary = `${PROMQL_DIST}promql`;
    if (!fs.existsSync(binary)) throw new DomainError('unavailable', PROMQL_NOT_BUILT);
    engine = new Engine(binary, process.env.QW_THREADS ?? '1');
    if (engine.pid) onStart(engine.pid);
  }
  const e = engine;
  return (request, fetch) => e.evaluate(request, fetch);
}
