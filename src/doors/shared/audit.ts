import { log } from '../../log.ts';
import type { IngestService } from '../../ingest/service.ts';
import { AUDIT_DATASET, type Principal } from './auth.ts';

/**
 * The audit trail (issue 34): who created, changed or deleted a user, role, key or dataset. Each event
 * is one JSON log line (`msg: "audit"`) and one row of the internal dataset `paudit`, which only admins
 * may read (canAccess) and only the service writes (ingest rights' `except`). A row that cannot be
 * stored (storage down) is logged as a warning: the log line is the record of last resort.
 */
export type AuditAction = 'create' | 'update' | 'delete';
export type AuditTarget = 'user' | 'role' | 'default-role' | 'key' | 'password' | 'dataset';

export interface AuditEvent {
  action: AuditAction;
  target: AuditTarget;
  name: string;
  /** Facts of the change (role names, grants); never a password or a key. */
  detail?: Record<string, unknown>;
}

/** Who the log and the row name: the user, else the key's id and role. */
export const actorOf = (p: Principal) => (p.user !== undefined ? { actor: p.user, actorKind: p.keyId ? 'user-key' : 'user' } : { actor: p.id, actorKind: `${p.role}-key` });

export class Audit {
  constructor(private readonly ingest: IngestService) {}

  async record(p: Principal, e: AuditEvent): Promise<void> {
    const row = { ...actorOf(p), action: e.action, target: e.target, name: e.name, detail: e.detail ? JSON.stringify(e.detail) : undefined };
    log.info('audit', row);
    try {
      await this.ingest.ingest({
        format: { kind: 'json' },
        dataset: AUDIT_DATASET,
        headers: new Headers({ 'content-type': 'application/json' }),
        body: Buffer.from(JSON.stringify(row)),
        rights: { key: 'audit', ingest: true, create: true },
      });
    } catch (err) {
      log.warn('audit row not stored (the log line above is the record)', { error: (err as Error).message, ...row });
    }
  }
}
