import { describe, expect, it } from 'vitest';
import { datasetOfIndex, decodeBulk, type BulkItem } from '../../src/ingest/esbulk/decode.ts';

/** A recording sink: every item and every document the decoder reports, in order. */
function record(body: string, defaultIndex?: string, exact = true) {
  const items: BulkItem[] = [];
  const docs: [string, unknown][] = [];
  decodeBulk(Buffer.from(body), defaultIndex, '2026-11-28T00:00:00.000Z', {
    item: (item) => items.push(item),
    document: (dataset, json) => docs.push([dataset, exact ? JSON.parse(json) : json]),
  }, exact);
  return { items, docs, statuses: items.map((i) => (i.outcome.ok ? 'ok' : `${i.outcome.status} ${i.outcome.type}`)) };
}

const nd = (...lines: unknown[]) => lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';
const T = '2026-11-28T10:00:00.000Z';

describe('datasetOfIndex', () => {
  it.each([
    ['logs', 'logs'],
    ['logs-2026.11.28', 'logs'],
    ['logs-2026.11', 'logs'],
    ['logs-2026-11-28', 'logs'],
    ['app_20261128', 'app'],
    ['.ds-logs-nginx-default-2026.11.28-000001', 'logs-nginx-default'],
    ['logs-generic.otel-default', 'logs-generic_otel-default'],
    ['filebeat-8.17.0', 'filebeat-8_17_0'],
    ['2026-logs', 'es_2026-logs'],
  ])('%s → %s', (index, dataset) => {
    expect(datasetOfIndex(index)).toBe(dataset);
  });
});

describe('decodeBulk', () => {
  it.each([
    ['index and create store their documents', nd({ index: { _index: 'a' } }, { '@timestamp': T, m: 1 }, { create: { _index: 'b' } }, { '@timestamp': T, m: 2 }), ['ok', 'ok'], [['a', { '@timestamp': T, m: 1 }], ['b', { '@timestamp': T, m: 2 }]]],
    ['the URL index is the default', nd({ index: {} }, { '@timestamp': T }), ['ok'], [['dflt', { '@timestamp': T }]]],
    ['a document without @timestamp gets the receive time', nd({ index: { _index: 'a' } }, { m: 1 }), ['ok'], [['a', { '@timestamp': '2026-11-28T00:00:00.000Z', m: 1 }]]],
    ['update fails alone (append-only)', nd({ update: { _index: 'a', _id: '1' } }, { doc: { m: 1 } }, { index: { _index: 'a' } }, { '@timestamp': T }), ['400 illegal_argument_exception', 'ok'], [['a', { '@timestamp': T }]]],
    ['delete has no document line and fails alone', nd({ delete: { _index: 'a', _id: '1' } }, { index: { _index: 'a' } }, { '@timestamp': T }), ['400 illegal_argument_exception', 'ok'], [['a', { '@timestamp': T }]]],
    ['a document that is not JSON fails alone', nd({ index: { _index: 'a' } }, '{"m": ', { index: { _index: 'a' } }, { '@timestamp': T }), ['400 document_parsing_exception', 'ok'], [['a', { '@timestamp': T }]]],
    ['a document that is not an object fails alone', nd({ index: { _index: 'a' } }, '[1,2]', { index: { _index: 'a' } }, '"text"'), ['400 document_parsing_exception', '400 document_parsing_exception'], []],
    ['a truncated body: the last action without its document fails', nd({ index: { _index: 'a' } }, { '@timestamp': T }, { index: { _index: 'a' } }), ['ok', '400 action_request_validation_exception'], [['a', { '@timestamp': T }]]],
    ['blank lines and a missing final newline are accepted', `\n${JSON.stringify({ index: { _index: 'a' } })}\n\n${JSON.stringify({ '@timestamp': T })}`, ['ok'], [['a', { '@timestamp': T }]]],
  ])('%s', (_name, body, statuses, docs) => {
    const r = record(body, 'dflt');
    expect(r.statuses).toEqual(statuses);
    expect(r.docs).toEqual(docs);
  });

  it.each([
    ['an action line that is not JSON', nd('{"index": {', { '@timestamp': T }), /line 1: malformed action/],
    ['an unknown action', nd({ upsert: { _index: 'a' } }, { '@timestamp': T }), /expected one of index, create, update, delete/],
    ['two actions in one line', nd({ index: {}, create: {} }, { '@timestamp': T }), /expected one of/],
    ['metadata that is not an object', nd({ index: 'a' }, { '@timestamp': T }), /metadata must be an object/],
    ['no index anywhere', nd({ index: {} }, { '@timestamp': T }), /names no _index/],
  ])('%s refuses the whole request', (_name, body, message) => {
    expect(() => record(body)).toThrow(message);
  });

  // Without `exact` a document is only looked at; the service parses the group and falls back to exact.
  it.each([
    ['an object is passed on as it is', '{"@timestamp":"t","a":1}', ['ok'], ['{"@timestamp":"t","a":1}']],
    ['@timestamp is added in front when absent', '{ "a": 1 }', ['ok'], ['{"@timestamp":"2026-11-28T00:00:00.000Z", "a": 1 }']],
    ['… also to an empty object', '{}', ['ok'], ['{"@timestamp":"2026-11-28T00:00:00.000Z"}']],
    ['not an object: fails alone', '[1]', ['400 document_parsing_exception'], []],
    ['two objects on one line pass (the service\'s event count catches them)', '{"a":1},{"b":2}', ['ok'], ['{"@timestamp":"2026-11-28T00:00:00.000Z","a":1},{"b":2}']],
  ])('fast path: %s', (_name, doc, statuses, docs) => {
    const r = record(nd({ index: { _index: 'a' } }, doc), undefined, false);
    expect(r.statuses).toEqual(statuses);
    expect(r.docs.map(([, json]) => json)).toEqual(docs);
  });

  it('keeps _id and the action of each item', () => {
    const r = record(nd({ create: { _index: 'logs-2026.11.28', _id: 'x1' } }, { '@timestamp': T }));
    expect(r.items).toEqual([{ action: 'create', index: 'logs-2026.11.28', dataset: 'logs', id: 'x1', outcome: { ok: true } }]);
  });
});
