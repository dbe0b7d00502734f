// The flush of a wide dataset measured with DuckDB alone (docs/memory.md "Wide datasets"): read_json of an
// NDJSON file like a WAL segment (COLUMNS string fields × ROWS rows) → zstd Parquet at a memory limit.
// node scripts/bench/wide-flush.mjs COLUMNS ROWS MEMORY ['SET …;SET …']   (RG=rows per row group)
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';
const [cols, rows, mem, extra] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4], process.argv[5] ?? ''];
const f = `/tmp/wm/d_${cols}_${rows}.json`;
if (!fs.existsSync(f)) { const out = []; for (let r = 0; r < rows; r++) { const o = { ts: new Date(1.7e12 + r * 10).toISOString() }; for (let i = 0; i < cols; i++) o['c' + i] = 'v' + ((r * (i + 7)) % 1000); out.push(JSON.stringify(o)); } fs.writeFileSync(f, out.join('\n') + '\n'); }
const inst = await DuckDBInstance.create(':memory:', { threads: '1' });
const c = await inst.connect();
await c.run(`SET memory_limit='${mem}'`); await c.run(`SET temp_directory='/tmp/wm/tmp'`);
for (const s of extra.split(';').filter(Boolean)) await c.run(s);
const colsStruct = `{ts: 'TIMESTAMP', ${Array.from({length: cols}, (_, i) => `c${i}: 'VARCHAR'`).join(', ')}}`;
try { await c.run(`COPY (SELECT * FROM read_json('${f}', format='newline_delimited', columns=${colsStruct})) TO '/tmp/wm/out.parquet' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 3, ROW_GROUP_SIZE ${process.env.RG ?? 122880})`); console.log(cols, rows, mem, extra, 'OK'); }
catch (e) { console.log(cols, rows, mem, extra, 'FAIL', String(e.message).slice(0,90)); }
