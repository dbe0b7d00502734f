// The last-resort flush of a wide dataset measured with the storage DuckDB's settings (docs/memory.md "Wide
// datasets", src/storage/wal/walSplit.ts): COLUMNS string fields × ROWS rows of NDJSON read as lines (walLinesSql)
// → one unpartitioned zstd Parquet COPY, at a memory limit. Needs `npm run build` (imports dist/).
// node scripts/bench/wide-lines.mjs COLUMNS ROWS MEMORY      (VLEN=n pads every value by n characters)
import { openDuckDB } from '../../dist/duckdb.js';
import { walLinesSql } from '../../dist/storage/parquetWriter.js';
import fs from 'node:fs';
const [cols, rows, mem] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4]];
const dir = '/tmp/wide-lines';
fs.mkdirSync(`${dir}/tmp`, { recursive: true });
const pad = 'x'.repeat(Number(process.env.VLEN ?? 0));
const f = `${dir}/d_${cols}_${rows}_${pad.length}.ndjson`;
if (!fs.existsSync(f)) {
  const out = [];
  for (let r = 0; r < rows; r++) {
    const o = { p_timestamp: new Date(1.7e12 + r * 10).toISOString() };
    for (let i = 0; i < cols; i++) o[`f${String(i).padStart(4, '0')}`] = `v${r}-${i}-${(r * 7919 + i * 104729) % 100003}${pad}`;
    out.push(JSON.stringify(o));
  }
  fs.writeFileSync(f, `${out.join('\n')}\n`);
}
const inst = await openDuckDB({ dataDir: dir, threads: 1, memoryLimit: mem, tempDir: `${dir}/tmp` });
const c = await inst.connect();
const columns = [['p_timestamp', 'TIMESTAMP'], ...Array.from({ length: cols }, (_, i) => [`f${String(i).padStart(4, '0')}`, 'VARCHAR'])];
const names = columns.map(([n]) => `"${n}"`).join(', ');
const t0 = Date.now();
try {
  await c.run(`COPY (SELECT ${names} FROM (${walLinesSql([f], columns, 'p_timestamp')})) TO '${dir}/out.parquet' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 3, ROW_GROUP_SIZE ${rows})`);
  console.log(cols, rows, mem, `line ${Math.round(fs.statSync(f).size / rows)} B`, 'OK', Date.now() - t0, 'ms');
} catch (e) {
  console.log(cols, rows, mem, `line ${Math.round(fs.statSync(f).size / rows)} B`, 'FAIL', String(e.message).slice(0, 90));
}
