import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import type { Component } from '../../component.ts';
import { listenError } from '../../errors.ts';
import type { Services } from '../shared/context.ts';
import { createApp } from './app.ts';

/** The HTTP listener (every door mounted on it, see app.ts) as a component: listening once started. */
export class HttpListener implements Component {
  readonly name = 'http';
  #server?: Server;
  #port = 0;

  constructor(private readonly services: Services) {}

  /** The port bound (P_ADDR may ask for port 0). */
  get port(): number {
    return this.#port;
  }

  async start(): Promise<void> {
    const { config, connections } = this.services;
    // Node checks request-head and request timeouts every connectionsCheckingInterval (30 s by default).
    const server = serve({ fetch: createApp(this.services).fetch, hostname: config.host, port: config.port, serverOptions: { connectionsCheckingInterval: 1000 } }) as Server;
    this.#server = server;
    // Longer than the idle timeout of common load balancers (60 s), so they never reuse a connection
    // the service is closing (Node's default of 5 s causes sporadic resets behind nginx/ALB).
    server.keepAliveTimeout = 65_000;
    connections.attachHttp(server, { name: 'http', ingest: true });
    this.#port = await listening(server, `${config.host}:${config.port}`);
  }

  /** Stops accepting; requests under way finish on their own (not waited for, as always). */
  stop(): void {
    this.#server?.close();
  }
}

/** Resolves with the HTTP port bound once the server listens; a port taken is one line naming P_ADDR. */
function listening(server: Server, addr: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const port = () => (server.address() as AddressInfo).port;
    if (server.listening) return resolve(port());
    const fail = (err: Error) => reject(listenError('HTTP', addr, 'P_ADDR', err, false));
    server.once('error', fail);
    server.once('listening', () => {
      server.off('error', fail);
      resolve(port());
    });
  });
}
