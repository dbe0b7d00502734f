/**
 * Elasticsearch's bulk API body (NDJSON: an action line, then for `index`/`create` a document line),
 * bytes in, JSON events per dataset out. Each item's outcome goes to a recording sink, so a bad item
 * fails alone. A line that is not an action where one is due ends the whole request with an error, as
 * Elasticsearch does: after it there is no telling actions from documents.
 */
import { invalidInput } from '../../errors.ts';

/** How one bulk item ended before storage (storage's own outcome is added by the caller). */
export type ItemOutcome = { ok: true } | { ok: false; status: number; type: string; reason: string };

export interface BulkItem {
  action: 'index' | 'create' | 'update' | 'delete';
  index: string;
  /** The dataset the index maps to (datasetOfIndex). */
  dataset: string;
  id: string | undefined;
  outcome: ItemOutcome;
}

/** What the decoder reports: every item in order, and each good document's JSON text under its dataset. */
export interface BulkSink {
  item(item: BulkItem): void;
  document(dataset: string, json: string): void;
}

const ACTIONS = new Set(['index', 'create', 'update', 'delete']);
/** The time field of documents (ECS); a document without one gets the receive time there. */
export const ES_TIME_FIELD = '@timestamp';

/**
 * The dataset an index name maps to: a data stream's backing index (`.ds-logs-app-2026.11.28-000001`)
 * to its stream, a date suffix (`-2026.11.28`, `-2026.11`, `-2026-11-28`, `_20261128`) dropped, then every
 * character a dataset name may not hold (anything but letters, digits, `_`, `-`) becomes `_`, and a
 * name not starting with a letter gets `es_` in front. So `logs-2026.11.28` and `logs-2026.11.29` are
 * one dataset `logs`, and `logs-app.web` is `logs-app_web`.
 */
export function datasetOfIndex(index: string): string {
  let name = index.replace(/^\.ds-/, '').replace(/-\d{6}$/, '');
  name = name.replace(/[-_.]\d{4}([-.]?\d{2}){1,2}$/, '').replace(/[-_.]\d{8}$/, '');
  name = name.replace(/[^A-Za-z0-9_-]/g, '_');
  return /^[A-Za-z]/.test(name) ? name : `es_${name}`;
}

const fail = (status: number, type: string, reason: string): ItemOutcome => ({ ok: false, status, type, reason });

/** The action line's one key and its metadata; a 400 of the whole request when it is not one. */
function parseAction(line: string, lineNo: number): { action: BulkItem['action']; meta: Record<string, unknown> } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (err) {
    throw invalidInput(`line ${lineNo}: malformed action/metadata line: ${(err as Error).message}`);
  }
  const keys = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? Object.keys(parsed) : [];
  if (keys.length !== 1 || !ACTIONS.has(keys[0])) throw invalidInput(`line ${lineNo}: malformed action/metadata line, expected one of index, create, update, delete`);
  const meta = (parsed as Record<string, unknown>)[keys[0]];
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) throw invalidInput(`line ${lineNo}: the ${keys[0]} action's metadata must be an object`);
  return { action: keys[0] as BulkItem['action'], meta: meta as Record<string, unknown> };
}

/**
 * A document line as the JSON text to store, with `@timestamp` added when it has none. `exact`: parsed
 * here, so that a bad document fails alone. Otherwise only its shape is looked at (an object's braces;
 * `"@timestamp"` anywhere in it taken as present): the worker that stores the batch parses it anyway, and
 * a batch it refuses is decoded again exactly (the caller's fallback). That keeps one parse per document
 * in the common case.
 */
function documentText(line: string, receivedIso: string, exact: boolean): string | ItemOutcome {
  if (!exact) {
    const t = line.trim();
    if (t.charCodeAt(0) !== 0x7b || t.charCodeAt(t.length - 1) !== 0x7d) return fail(400, 'document_parsing_exception', 'the document is not a JSON object');
    if (t.includes(`"${ES_TIME_FIELD}"`)) return t;
    return `{"${ES_TIME_FIELD}":"${receivedIso}"${/^\{\s*\}$/.test(t) ? '' : ','}${t.slice(1)}`;
  }
  let doc: unknown;
  try {
    doc = JSON.parse(line);
  } catch (err) {
    return fail(400, 'document_parsing_exception', `failed to parse the document: ${(err as Error).message}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return fail(400, 'document_parsing_exception', 'the document is not a JSON object');
  if ((doc as Record<string, unknown>)[ES_TIME_FIELD] !== undefined) return line;
  return JSON.stringify({ [ES_TIME_FIELD]: receivedIso, ...(doc as Record<string, unknown>) });
}

/**
 * Decodes a bulk body. `defaultIndex` is the `{index}` of `/{index}/_bulk`. Blank lines are skipped;
 * a final line without its newline is accepted (Elasticsearch requires it, shippers always send it).
 */
export function decodeBulk(body: Buffer, defaultIndex: string | undefined, receivedIso: string, sink: BulkSink, exact = true): void {
  const lines = body.toString('utf8').split('\n');
  let i = 0;
  const next = () => {
    while (i < lines.length && lines[i].trim() === '') i++;
    return i < lines.length ? lines[i++] : undefined;
  };
  // Shippers repeat one action line for a whole batch (`{"create":{"_index":"logs"}}`): parsed once.
  let lastLine: string | undefined;
  let last: ReturnType<typeof parseAction> | undefined;
  for (let line = next(); line !== undefined; line = next()) {
    if (line !== lastLine) {
      last = parseAction(line, i);
      lastLine = line;
    }
    const { action, meta } = last!;
    const index = typeof meta._index === 'string' && meta._index !== '' ? meta._index : defaultIndex;
    const id = typeof meta._id === 'string' ? meta._id : undefined;
    if (index === undefined) throw invalidInput(`line ${i}: the ${action} action names no _index, and the URL none either`);
    const dataset = datasetOfIndex(index);
    if (action === 'delete') {
      sink.item({ action, index, dataset, id, outcome: fail(400, 'illegal_argument_exception', 'delete is not supported: datasets are append-only') });
      continue;
    }
    const doc = next();
    if (doc === undefined) {
      sink.item({ action, index, dataset, id, outcome: fail(400, 'action_request_validation_exception', `the ${action} action on line ${i} has no document line`) });
      break;
    }
    if (action === 'update') {
      sink.item({ action, index, dataset, id, outcome: fail(400, 'illegal_argument_exception', 'update is not supported: datasets are append-only') });
      continue;
    }
    const text = documentText(doc, receivedIso, exact);
    if (typeof text !== 'string') {
      sink.item({ action, index, dataset, id, outcome: text });
      continue;
    }
    sink.item({ action, index, dataset, id, outcome: { ok: true } });
    sink.document(dataset, text);
  }
}
