import { describe, expect, it } from 'vitest';
import { allows, parseRole, type Action } from '../../src/access/roles.js';
import { DomainError } from '../../src/errors.js';

const exists = (d: string) => ['app', 'web'].includes(d);

describe('parseRole', () => {
  const bad: Array<[string, unknown, RegExp]> = [
    ['unknown privilege', [{ privilege: 'owner', resource: { stream: 'app' } }], /privilege/],
    ['missing dataset', [{ privilege: 'reader', resource: { stream: 'nope' } }], /"nope" does not exist/],
    ['not a list', { privilege: 'reader' }, /invalid role/],
    ['unknown field', [{ privilege: 'reader', resource: { stream: 'app' }, extra: 1 }], /invalid role/],
  ];
  it.each(bad)('%s is a 4xx (invalid)', (_n, body, message) => {
    let caught: unknown;
    try {
      parseRole(body, exists);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(DomainError);
    expect((caught as DomainError).kind).toBe('invalid');
    expect((caught as DomainError).message).toMatch(message);
  });

  it('accepts Parseable bodies (admin without resource, * and named datasets)', () => {
    const body = [{ privilege: 'admin' }, { privilege: 'reader', resource: { stream: '*' } }, { privilege: 'writer', resource: { stream: 'app' } }];
    expect(parseRole(body, exists)).toEqual(body);
  });
});

describe('allows', () => {
  const contractor = parseRole([{ privilege: 'reader', resource: { stream: 'app' } }, { privilege: 'reader', resource: { stream: 'web' } }], exists);
  const cases: Array<[string, Action, string | undefined, boolean]> = [
    ['reads app', 'read', 'app', true],
    ['reads web', 'read', 'web', true],
    ['not another dataset', 'read', 'db', false],
    ['no ingest', 'ingest', 'app', false],
    ['no admin', 'admin', undefined, false],
  ];
  it.each(cases)('contractor %s', (_n, action, dataset, ok) => expect(allows(contractor, action, dataset)).toBe(ok));
  it('ingestor only ingests', () => {
    const g = parseRole([{ privilege: 'ingestor', resource: { stream: '*' } }], exists);
    expect([allows(g, 'ingest', 'x'), allows(g, 'read', 'x')]).toEqual([true, false]);
  });
});
