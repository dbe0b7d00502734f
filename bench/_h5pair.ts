import * as fs from 'node:fs';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
const dir = '/tmp/h5';
const now = Number(fs.readFileSync(`${dir}/now.txt`, 'utf8'));
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.parquet')).map((f) => `${dir}/${f}`).sort();
const variants = process.argv.slice(2);
const gap = Number(process.env.GAP ?? 3);
const N = Number(process.env.N ?? 300);
const lit = (ms: number) => `TIMESTAMP '${new Date(ms).toISOString().replace('T', ' ').replace('Z', '')}'`;
const start = now - 15 * 60_000 + 7_000;
async function setup(variant: string): Promise<{ conn: DuckDBConnection; q: (s: number, e: number) => string }> {
  const inst = await DuckDBInstance.create(':memory:', { threads: variant.includes('t1') ? '1' : '2' });
  const conn = await inst.connect();
  await conn.run('SET parquet_metadata_cache = true');
  if (variant.includes('nofc')) await conn.run('SET enable_external_file_cache = false');
  const meta = (await conn.runAndReadAll(`SELECT filename, epoch_ms(min(time)) AS lo, epoch_ms(max(time)) AS hi FROM read_parquet([${files.map((f) => `'${f}'`).join(',')}], filename=true) GROUP BY ALL ORDER BY lo`)).getRowObjectsJson() as { filename: string; lo: string; hi: string }[];
  const sel = meta.filter((m) => Number(m.hi) >= start);
  const head = sel.filter((m) => Number(m.lo) < start).map((m) => `'${m.filename}'`);
  const inside = sel.filter((m) => Number(m.lo) >= start).map((m) => `'${m.filename}'`);
  const cols = variant.includes('nocast') ? '*' : `CAST("time" AS TIMESTAMP) AS "time", CAST(level AS VARCHAR) AS level, CAST(service AS VARCHAR) AS service, CAST(latency_ms AS BIGINT) AS latency_ms, CAST(message AS VARCHAR) AS message, CAST(p_timestamp AS TIMESTAMP) AS p_timestamp`;
  const rng = `"time" >= getvariable('s') AND "time" < getvariable('e')`;
  let view = `SELECT ${cols} FROM read_parquet([${head}], hive_partitioning=false) WHERE ${rng} UNION ALL SELECT ${cols} FROM read_parquet([${inside}], hive_partitioning=false)`;
  if (variant.includes('one')) view = `SELECT ${cols} FROM read_parquet([${[...head, ...inside]}], hive_partitioning=false) WHERE ${rng}`;
  await conn.run(`SET VARIABLE s = ${lit(start)}; SET VARIABLE e = ${lit(now)}`);
  await conn.run(`CREATE TEMP VIEW small_sql AS ${view}`);
  const body = process.env.Q === 'count' ? `SELECT count(*) AS n FROM small_sql` : `SELECT time_bucket(INTERVAL '15 seconds', CAST("time" AS TIMESTAMP)) AS t, count(*) AS n FROM (SELECT * FROM small_sql) AS q GROUP BY t ORDER BY t`;
  return { conn, q: (s, e) => `SET VARIABLE s = ${lit(s)}; SET VARIABLE e = ${lit(e)}; SELECT * FROM (${body}\n) AS p_bounded LIMIT 10001` };
}
const set = await Promise.all(variants.map(setup));
const ms: number[][] = variants.map(() => []);
for (let i = 0; i < N + 20; i++) {
  for (let v = 0; v < set.length; v++) {
    await new Promise((r) => setTimeout(r, gap));
    const t = performance.now();
    await set[v].conn.run(set[v].q(start + (i % 3), now - (i % 2)));
    if (i >= 20) ms[v].push(performance.now() - t);
  }
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)].toFixed(2);
console.log(process.env.Q ?? 'hist', variants.map((v, i) => `${v} ${med(ms[i])}`).join('  '));
