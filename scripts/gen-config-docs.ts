/**
 * docs/configuration.md, generated from the settings' descriptions in src/settings.ts, so the reference
 * cannot drift from the schema: `npm run docs:config` writes it; test/unit/config.test.ts fails when the
 * committed file differs from what this renders.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { z } from 'zod';
import { envSchema, settingGroups } from '../src/config.ts';

export const configDocPath = path.resolve(import.meta.dirname, '../docs/configuration.md');

/** The default as a reader writes it (`10MiB`, `20s`), from the schema (a size or duration's text, before parsing). */
function defaultText(schema: z.ZodType): string | undefined {
  const def = schema._zod.def as { type: string; defaultValue?: unknown; in?: z.ZodType; innerType?: z.ZodType };
  if (def.type === 'default') return String(def.defaultValue);
  if (def.type === 'pipe' && def.in) return defaultText(def.in);
  return undefined;
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

export function renderConfigDocs(): string {
  const grouped = new Set<string>();
  const out: string[] = [
    '# Configuration',
    '',
    '<!-- Generated from the descriptions in src/settings.ts by `npm run docs:config`; edit those, not this file. -->',
    '',
    'Every setting is an environment variable, read once at start. Durations take `ms`, `s`, `m`, `h`, `d`',
    '(a plain number is milliseconds); sizes take `KiB`, `MiB`, `GiB` (or `KB`, `MB`, `GB`: the same powers',
    'of 1024; a plain number is bytes). An invalid value stops the service at start with a message naming the',
    'variable. The last group, test only, is fault injection for the test suite.',
  ];
  const table = (settings: Record<string, z.ZodType>) => {
    out.push('', '| variable | default | what it does |', '|---|---|---|');
    for (const [name, schema] of Object.entries(settings)) {
      grouped.add(name);
      const fallback = defaultText(schema);
      const shown = fallback === undefined ? '—' : fallback === '' ? '*(empty)*' : `\`${fallback}\``;
      out.push(`| \`${name}\` | ${shown} | ${cell(schema.description ?? '')} |`);
    }
  };
  for (const group of settingGroups) {
    out.push('', `## ${group.title}`, '', group.about);
    table(group.settings);
  }
  // A setting added to the schema outside any group still gets documented (and should join a group).
  const rest = Object.fromEntries(Object.entries(envSchema.shape).filter(([name]) => !grouped.has(name))) as Record<string, z.ZodType>;
  if (Object.keys(rest).length > 0) {
    out.push('', '## Other');
    table(rest);
  }
  return `${out.join('\n')}\n`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  fs.writeFileSync(configDocPath, renderConfigDocs());
  console.log(`wrote ${path.relative(process.cwd(), configDocPath)}`);
}
