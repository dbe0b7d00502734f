import { log } from './log.ts';

/**
 * A part of the service with a life of its own (the storage engine, the worker pools, the access store,
 * each door's listener): it owns its settings group, its gauges and its start and stop, so that main only
 * builds the parts in order and starts each through `Components` (as Loki's modules and Prometheus' run
 * groups do).
 */
export interface Component {
  readonly name: string;
  /** Ready to serve when it resolves; a throw stops the components started before it. */
  start(): Promise<void> | void;
  /** Registers the component's gauges (src/metrics.ts), once, when it has started (before any door serves /metrics). */
  gauges?(): void;
  /** Stops it; called once, in the reverse order of start, and only when its start succeeded. */
  stop(): Promise<void> | void;
}

/**
 * The components of one process, started one after another (each may use those before it) and stopped
 * last first. When one fails to start, those already started are stopped and its error is thrown.
 */
export class Components {
  #started: Component[] = [];

  /** Starts `c` (then its gauges) and returns it, for the next components to be built over. */
  async start<C extends Component>(c: C): Promise<C> {
    try {
      await c.start();
      c.gauges?.();
    } catch (err) {
      await this.stop();
      throw err;
    }
    this.#started.push(c);
    return c;
  }

  /** Stops every started component, last started first; a failing stop is logged and the rest still stop. */
  async stop(): Promise<void> {
    for (const c of this.#started.splice(0).reverse()) {
      try {
        await c.stop();
      } catch (err) {
        log.error('stopping a component failed', { component: c.name, error: err as Error });
      }
    }
  }
}
