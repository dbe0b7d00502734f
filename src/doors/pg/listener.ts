import type { AddressInfo, Server } from 'node:net';
import type { Component } from '../../component.ts';
import type { Services } from '../shared/context.ts';
import { startPgServer, type PgSettings } from './server.ts';

/** The PostgreSQL listener (P_PG_ADDR) as a component. */
export class PgListener implements Component {
  readonly name = 'pg';
  #server?: Server;

  constructor(
    private readonly services: Services,
    private readonly settings: PgSettings,
  ) {}

  get port(): number {
    return (this.#server?.address() as AddressInfo).port;
  }

  async start(): Promise<void> {
    this.#server = await startPgServer(this.services, this.settings);
  }

  /** Stops accepting; sessions under way end on their own (not waited for, as always). */
  stop(): void {
    this.#server?.close();
  }
}
