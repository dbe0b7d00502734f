import { z } from 'zod';
import { invalidInput } from '../errors.ts';

/**
 * Roles in Parseable's shape (`PUT /api/v1/role/{name}` body): a list of privileges, each over one dataset
 * or `*`. Parsed here with zod so a bad body becomes one clear 4xx before anything is written.
 */
export const PRIVILEGES = ['admin', 'editor', 'writer', 'reader', 'ingestor'] as const;
export type Privilege = (typeof PRIVILEGES)[number];
export type Action = 'ingest' | 'create' | 'read' | 'delete' | 'admin';

/** What each privilege allows; admin is the only one that manages users, roles and keys. */
export const PRIVILEGE_ACTIONS: Record<Privilege, ReadonlySet<Action>> = {
  admin: new Set(['ingest', 'create', 'read', 'delete', 'admin']),
  editor: new Set(['ingest', 'create', 'read', 'delete']),
  writer: new Set(['ingest', 'create', 'read']),
  reader: new Set(['read']),
  ingestor: new Set(['ingest']),
};

const grantSchema = z
  .object({
    privilege: z.enum(PRIVILEGES),
    // Parseable's admin and editor privileges carry no resource: they cover every dataset.
    resource: z.object({ stream: z.string().min(1) }).optional(),
  })
  .strict();
export const roleBodySchema = z.array(grantSchema);
export type Grant = z.infer<typeof grantSchema>;

/** Parse a role body; every dataset it names must exist (`*` means all). */
export function parseRole(body: unknown, datasetExists: (name: string) => boolean): Grant[] {
  const parsed = roleBodySchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalidInput(`invalid role: ${issue.path.join('.') || 'body'}: ${issue.message}`);
  }
  for (const g of parsed.data) {
    const stream = g.resource?.stream;
    if (stream !== undefined && stream !== '*' && !datasetExists(stream)) {
      throw invalidInput(`invalid role: dataset ${JSON.stringify(stream)} does not exist`);
    }
  }
  return parsed.data;
}

/** Whether the grants allow `action` (on `dataset` when given; without one, on some dataset). */
export function allows(grants: readonly Grant[], action: Action, dataset?: string): boolean {
  return grants.some((g) => {
    if (!PRIVILEGE_ACTIONS[g.privilege].has(action)) return false;
    const stream = g.resource?.stream ?? '*';
    return dataset === undefined || stream === '*' || stream === dataset;
  });
}
