import { timedOut, type DomainError } from '../errors.ts';

/*
 * The minimum rate of a request body as it arrives (P_INGEST_MIN_BODY_RATE after P_INGEST_BODY_TIMEOUT):
 * a body too slow has its stream destroyed (service.ts reads bodies through it).
 */

/** A body still arriving; `destroy` (a Node stream's) closes its connection when it is too slow. */
export type IngestBody = AsyncIterable<Uint8Array> & { destroy?: (error?: Error) => void };

/**
 * The minimum body rate: by `grace + received / minRate` after the start the body must be complete,
 * or its stream is destroyed. One timer per request, moved on only when it fires.
 */
export class BodyDeadline {
  expired: DomainError | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly started = Date.now();

  constructor(
    private readonly source: IngestBody,
    private readonly graceMs: number,
    private readonly minRate: number,
    private readonly received: () => number,
  ) {
    if (source.destroy) this.arm();
  }

  private arm(): void {
    const due = this.started + this.graceMs + (this.received() / this.minRate) * 1000;
    const wait = due - Date.now();
    if (wait > 0) {
      this.timer = setTimeout(() => this.arm(), wait);
      return;
    }
    this.expired = timedOut(`the request body arrived too slowly (${this.received()} bytes in ${Date.now() - this.started} ms; P_INGEST_MIN_BODY_RATE after P_INGEST_BODY_TIMEOUT)`);
    this.source.destroy!(this.expired);
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}
