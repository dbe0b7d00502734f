/** Structured logging: one JSON object per line on stdout. */
type Level = 'debug' | 'info' | 'warn' | 'error';
const order: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };
let threshold: Level = (process.env.P_LOG_LEVEL as Level) in order ? (process.env.P_LOG_LEVEL as Level) : 'info';

export function setLogLevel(level: Level): void {
  threshold = level;
}

function emit(level: Level, msg: string, fields?: Record<string, unknown>, always = false): void {
  if (!always && order[level] < order[threshold]) return;
  const line = JSON.stringify({ ts: new Date().toISOString(), level, msg, ...fields }, (_k, v) =>
    typeof v === 'bigint' ? v.toString() : v instanceof Error ? { message: v.message, stack: v.stack } : v,
  );
  process.stdout.write(`${line}\n`);
}

export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => emit('debug', msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => emit('info', msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => emit('warn', msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => emit('error', msg, fields),
  /** An info line written at every log level: where the service listens (whoever bound port 0 needs it). */
  announce: (msg: string, fields?: Record<string, unknown>) => emit('info', msg, fields, true),
};
