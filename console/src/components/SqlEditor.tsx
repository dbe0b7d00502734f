import { useEffect, useRef } from 'preact/hooks';
import { basicSetup } from 'codemirror';
import { EditorView, keymap, placeholder } from '@codemirror/view';
import { Compartment, EditorState, Prec } from '@codemirror/state';
import { sql, PostgreSQL, type SQLNamespace } from '@codemirror/lang-sql';
import { HighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { tags } from '@lezer/highlight';
import type { Completion } from '@codemirror/autocomplete';
import { ident } from '../lib/sql.ts';

/** Colours from CSS variables, so the light and dark themes need one highlighter. */
const highlight = HighlightStyle.define([
  { tag: tags.keyword, color: 'var(--hl-keyword)', fontWeight: '600' },
  { tag: [tags.string, tags.special(tags.string)], color: 'var(--hl-string)' },
  { tag: [tags.number, tags.bool, tags.null], color: 'var(--hl-number)' },
  { tag: tags.comment, color: 'var(--hl-comment)', fontStyle: 'italic' },
  { tag: [tags.operator, tags.punctuation], color: 'var(--hl-operator)' },
  { tag: [tags.typeName, tags.function(tags.variableName)], color: 'var(--hl-function)' },
  { tag: tags.special(tags.name), color: 'var(--hl-string)' },
]);

/** The page's CSP nonce: CodeMirror's own <style> element needs it under a CSP without 'unsafe-inline'. */
const nonce = document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content ?? '';

export type CompletionSchema = Record<string, string[]>;

/** Datasets and their columns for completion; names that need quotes are inserted quoted. */
function namespace(schema: CompletionSchema): SQLNamespace {
  const ns: Record<string, SQLNamespace> = {};
  for (const [table, columns] of Object.entries(schema)) {
    ns[table] = {
      self: { label: table, apply: ident(table), type: 'type', detail: 'dataset' },
      children: columns.map((c): Completion => ({ label: c, apply: ident(c), type: 'property' })),
    };
  }
  return ns;
}

interface Props {
  /** The text to show: set at start, and whenever it changes from outside (a link, a saved query). */
  value: string;
  /** Every edit; meant for a ref, not for state (a re-render per keystroke is what this avoids). */
  onChange?: (sql: string) => void;
  /** Ctrl/Cmd+Enter or Shift+Enter, with the current text. */
  onRun: (sql: string) => void;
  schema: CompletionSchema;
  defaultTable?: string;
  label?: string;
}

export function SqlEditor({ value, onChange, onRun, schema, defaultTable, label = 'SQL query' }: Props) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const lang = useRef(new Compartment());
  // The latest callbacks, read by the editor's handlers that are created once.
  const cb = useRef({ onChange, onRun });
  cb.current = { onChange, onRun };
  // The text the editor last reported: a `value` equal to it is our own echo, arriving after the
  // user may have typed more, and must not overwrite the newer text.
  const reported = useRef(value);

  useEffect(() => {
    const v = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: value,
        extensions: [
          Prec.highest(
            keymap.of([
              { key: 'Mod-Enter', run: (v) => (cb.current.onRun(v.state.doc.toString()), true) },
              { key: 'Shift-Enter', run: (v) => (cb.current.onRun(v.state.doc.toString()), true) },
            ]),
          ),
          EditorView.cspNonce.of(nonce),
          basicSetup,
          syntaxHighlighting(highlight),
          lang.current.of(sql({ dialect: PostgreSQL, upperCaseKeywords: true, schema: namespace(schema), defaultTable })),
          placeholder('SELECT * FROM dataset'),
          EditorView.lineWrapping,
          EditorView.contentAttributes.of({ 'aria-label': label }),
          EditorView.updateListener.of((u) => {
            if (!u.docChanged) return;
            reported.current = u.state.doc.toString();
            cb.current.onChange?.(reported.current);
          }),
        ],
      }),
    });
    view.current = v;
    return () => v.destroy();
  }, []);

  // Completion follows the datasets and columns as they load.
  useEffect(() => {
    view.current?.dispatch({
      effects: lang.current.reconfigure(sql({ dialect: PostgreSQL, upperCaseKeywords: true, schema: namespace(schema), defaultTable })),
    });
  }, [schema, defaultTable]);

  // A value set from outside (a saved query, a link) replaces the text; typing does not come back here.
  useEffect(() => {
    const v = view.current;
    if (!v || value === reported.current || v.state.doc.toString() === value) return;
    reported.current = value;
    v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
  }, [value]);

  return <div class="sql-editor" ref={host} />;
}
