import type { Component } from '../../component.ts';
import type { Config } from '../../config.ts';
import { startOtlpGrpc, type OtlpGrpcDeps, type OtlpGrpcServer } from './otlp.ts';

/** The OTLP/gRPC listener (P_OTLP_GRPC_ADDR) as a component. */
export class GrpcListener implements Component {
  readonly name = 'grpc';
  #server?: OtlpGrpcServer;

  constructor(
    private readonly settings: Config['otlpGrpc'] & { addr: string },
    private readonly deps: OtlpGrpcDeps,
  ) {}

  get port(): number | undefined {
    return this.#server?.port;
  }

  async start(): Promise<void> {
    this.#server = await startOtlpGrpc(this.settings, this.deps);
  }

  stop(): Promise<void> | undefined {
    return this.#server?.close();
  }
}
