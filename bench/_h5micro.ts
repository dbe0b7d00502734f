import * as fs from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
const dir = '/tmp/h5';
const now = Number(fs.readFileSync(`${dir}/now.txt`, 'utf8'));
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.parquet')).map((f) => `${dir}/${f}`).sort();
const variant = process.argv[2] ?? 'base';
const gap = Number(process.argv[3] ?? 3);
const inst = await DuckDBInstance.create(':memory:', { threads: variant === 't1' ? '1' : '2' });
const conn = await inst.connect();
await conn.run('SET parquet_metadata_cache = true');
if (variant === 'nofc') await conn.run('SET enable_external_file_cache = false');
const meta = (await conn.runAndReadAll(`SELECT filename, epoch_ms(min(time)) AS lo, epoch_ms(max(time)) AS hi FROM read_parquet([${files.map((f) => `'${f}'`).join(',')}], filename=true) GROUP BY ALL ORDER BY lo`)).getRowObjectsJson() as { filename: string; lo: string; hi: string }[];
const start = now - 15 * 60_000 + 7_000;
const sel = meta.filter((m) => Number(m.hi) >= start);
const head = sel.filter((m) => Number(m.lo) < start).map((m) => `'${m.filename}'`);
const inside = sel.filter((m) => Number(m.lo) >= start).map((m) => `'${m.filename}'`);
const cols = `CAST("time" AS TIMESTAMP) AS "time", CAST(level AS VARCHAR) AS level, CAST(service AS VARCHAR) AS service, CAST(latency_ms AS BIGINT) AS latency_ms, CAST(message AS VARCHAR) AS message, CAST(p_timestamp AS TIMESTAMP) AS p_timestamp`;
const rng = `"time" >= getvariable('s') AND "time" < getvariable('e')`;
let view = `SELECT ${cols} FROM read_parquet([${head}], hive_partitioning=false) WHERE ${rng} UNION ALL SELECT ${cols} FROM read_parquet([${inside}], hive_partitioning=false)`;
if (variant === 'one') view = `SELECT ${cols} FROM read_parquet([${[...head, ...inside]}], hive_partitioning=false) WHERE ${rng}`;
await conn.run(`SET VARIABLE s = TIMESTAMP '${new Date(start).toISOString().replace('T', ' ').replace('Z', '')}'; SET VARIABLE e = TIMESTAMP '${new Date(now).toISOString().replace('T', ' ').replace('Z', '')}'`);
await conn.run(`CREATE TEMP VIEW small_sql AS ${view}`);
const hist = `SELECT * FROM (SELECT time_bucket(INTERVAL '15 seconds', CAST("time" AS TIMESTAMP)) AS t, count(*) AS n FROM (SELECT * FROM small_sql) AS q GROUP BY t ORDER BY t\n) AS p_bounded LIMIT 10001`;
const count = `SELECT * FROM (SELECT count(*) AS n FROM small_sql\n) AS p_bounded LIMIT 10001`;
const out: Record<string, number> = {};
for (const [name, q] of [['count', count], ['hist', hist]] as const) {
  const ms: number[] = [];
  for (let i = 0; i < 220; i++) {
    const e = now - (i % 2) * 1; // range changes every query, as "the last 15 min"
    const stmt = `SET VARIABLE s = TIMESTAMP '${new Date(start + (i % 2)).toISOString().replace('T', ' ').replace('Z', '')}'; SET VARIABLE e = TIMESTAMP '${new Date(e).toISOString().replace('T', ' ').replace('Z', '')}'; ${q}`;
    if (gap) await new Promise((r) => setTimeout(r, gap));
    const t = performance.now();
    const r = await conn.run(stmt);
    if (i === 0 && name === 'hist') console.error(r.rowCount ?? '');
    if (i >= 20) ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  out[name] = Math.round(ms[100] * 100) / 100;
}
console.log(variant, `gap ${gap}`, `files ${head.length}+${inside.length}`, JSON.stringify(out));
