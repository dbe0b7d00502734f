// The part of splunk-logging (npm, no types of its own) that test/shippers.test.ts uses.
declare module 'splunk-logging' {
  interface Payload {
    message: unknown;
    metadata?: { time?: number; host?: string; source?: string; sourcetype?: string; index?: string };
  }
  class Logger {
    constructor(config: { token: string; url: string; maxBatchCount?: number });
    send(payload: Payload, callback?: (err: unknown, resp: unknown, body: unknown) => void): void;
  }
  const splunk: { Logger: typeof Logger };
  export default splunk;
}
