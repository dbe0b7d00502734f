/**
 * The window of times OTLP records and remote-write samples may carry (issue 30 A10,
 * src/ingest/timeWindow.ts): each case's expectation is computed from epoch milliseconds, the rule
 * itself compares ISO text.
 */
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { serializeJob, type IngestJob, type PlacementTarget } from '../../src/ingest/worker/pipeline.ts';
import type { RequestLimits } from '../../src/ingest/limits.ts';
import { outsideWindow, timeWindow } from '../../src/ingest/timeWindow.ts';
import { otlpLogsJson, otlpLogsProtobuf, remoteWriteV1 } from '../helpers/wire.ts';

const RECEIVED = Date.parse('2026-11-25T10:00:00.123Z');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const LIMITS: RequestLimits = { maxEvents: 200_000, maxValues: 4_000_000, maxNames: 1000 };

/** What the window should say, from milliseconds: inside, or which side. */
function expected(ms: number, pastMs: number, futureMs: number): 'in' | 'past' | 'future' {
  // The rule works to the second: a time within the bound's second is inside.
  const second = (t: number) => Math.floor(t / 1000);
  if (pastMs > 0 && second(ms) < second(RECEIVED - pastMs)) return 'past';
  if (second(ms) > second(RECEIVED + futureMs)) return 'future';
  return 'in';
}

describe('timeWindow / outsideWindow', () => {
  const limits: [string, Partial<RequestLimits>, number, number][] = [
    ['defaults (30 days back, 1 hour ahead)', {}, 30 * DAY, HOUR],
    ['set', { signalTimePastMs: 2 * DAY, eventTimeFutureMs: 5 * 60_000 }, 2 * DAY, 5 * 60_000],
    ['no past bound', { signalTimePastMs: 0, eventTimeFutureMs: HOUR }, 0, HOUR],
  ];
  const offsets = [-11 * 365 * DAY, -31 * DAY, -30 * DAY - 1000, -30 * DAY, -2 * DAY - 1000, -2 * DAY, -HOUR, 0, 5 * 60_000, 5 * 60_000 + 1000, HOUR, HOUR + 1000, 2 * HOUR, 11 * 365 * DAY];
  for (const [name, set, pastMs, futureMs] of limits) {
    it(name, () => {
      const w = timeWindow(RECEIVED, set);
      for (const off of offsets) {
        const iso = new Date(RECEIVED + off).toISOString();
        const why = outsideWindow(iso, w);
        const want = expected(RECEIVED + off, pastMs, futureMs);
        const got = why === undefined ? 'in' : /P_SIGNAL_TIME_PAST_LIMIT/.test(why) ? 'past' : 'future';
        expect({ iso, got }).toEqual({ iso, got: want });
      }
    });
  }

  it('signed years are outside, and nanosecond text compares like milliseconds', () => {
    const w = timeWindow(RECEIVED, {});
    expect(outsideWindow('+010000-01-01T00:00:00.000Z', w)).toMatch(/P_EVENT_TIME_FUTURE_LIMIT/);
    expect(outsideWindow('-000001-01-01T00:00:00.000Z', w)).toMatch(/P_SIGNAL_TIME_PAST_LIMIT/);
    expect(outsideWindow('-000001-01-01T00:00:00.000Z', timeWindow(RECEIVED, { signalTimePastMs: 0 }))).toBeUndefined();
    expect(outsideWindow('2026-11-25T11:00:00.123999999Z', w)).toBeUndefined();
    expect(outsideWindow('2026-11-25T11:00:01.000000000Z', w)).toMatch(/after the request was received/);
  });
});

describe('serializeJob keeps what is inside the window', () => {
  const target: PlacementTarget = { schema: {}, maxColumns: 1000 };
  // The reproducer, smaller: records an hour apart from 1,000 hours back to 1,000 hours ahead.
  const times = Array.from({ length: 2000 }, (_, i) => RECEIVED + (i - 1000) * HOUR + 17 * 60_000);
  const inside = times.filter((t) => expected(t, 30 * DAY, HOUR) === 'in');
  const records = times.map((timeMs, i) => ({ timeMs, body: `r${i}`, attributes: [] }));

  const otlp = (format: 'json' | 'protobuf', body: string | Buffer): IngestJob => ({
    kind: 'otlp', signal: 'logs', format, received: new Date(RECEIVED).toISOString(), body: new Uint8Array(Buffer.from(body)), maxDecompressedBytes: 64 << 20, limits: LIMITS,
  });

  for (const format of ['json', 'protobuf'] as const) {
    it(`OTLP/${format} logs: every record outside is rejected alone, counted in partial_success`, () => {
      const out = serializeJob(otlp(format, format === 'json' ? otlpLogsJson(records) : otlpLogsProtobuf(records)), target);
      expect(inside.length).toBe(30 * 24 + 1); // 720 hours back, the receive hour (+17 min is ahead by under an hour)
      expect(out.rows).toBe(inside.length);
      expect(out.info.rejected).toBe(times.length - inside.length);
      expect(out.info.rejectionMessage).toMatch(/log records timed outside the stored window were rejected; first: time_unix_nano .*P_SIGNAL_TIME_PAST_LIMIT/);
      const stored = String(out.lines).trim().split('\n').map((l) => Date.parse((JSON.parse(l) as { time_unix_nano: string }).time_unix_nano.slice(0, 23) + 'Z'));
      expect(stored).toEqual(inside);
    });
  }

  it('OTLP/JSON logs wholly inside take the direct path unchanged', () => {
    const recent = records.filter((_, i) => expected(times[i], 30 * DAY, HOUR) === 'in');
    const out = serializeJob(otlp('json', otlpLogsJson(recent)), target);
    expect(out).toMatchObject({ rows: recent.length, info: { rejected: 0 } });
  });

  const prom = (timestampMs: number): IngestJob => ({
    kind: 'prometheus', contentEncoding: 'snappy', received: new Date(RECEIVED).toISOString(), maxDecompressedBytes: 64 << 20, limits: LIMITS,
    body: new Uint8Array(remoteWriteV1([{ labels: [['__name__', 'up']], samples: [{ value: 1, timestampMs: RECEIVED - 1000 }, { value: 2, timestampMs }] }])),
  });
  const cases: [string, number, RegExp | number][] = [
    ['a sample of a minute ago', RECEIVED - 60_000, 2],
    ['a sample 2 hours ahead', RECEIVED + 2 * HOUR, /out of bounds: .*P_EVENT_TIME_FUTURE_LIMIT.*nothing of the request was stored/],
    ['a sample 31 days old', RECEIVED - 31 * DAY, /out of bounds: .*P_SIGNAL_TIME_PAST_LIMIT/],
    ['a sample at 0 ms', 0, /out of bounds: .*P_SIGNAL_TIME_PAST_LIMIT/],
  ];
  for (const [name, ts, want] of cases) {
    it(`remote write: ${name}`, () => {
      let got: number | string;
      try {
        got = serializeJob(prom(ts), target).rows;
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        expect(err.kind).toBe('invalid');
        got = err.message;
      }
      if (typeof want === 'number') expect(got).toBe(want);
      else expect(got).toMatch(want);
    });
  }
});
