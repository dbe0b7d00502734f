import { DuckDBInstance } from '@duckdb/node-api';
const inst = await DuckDBInstance.create(':memory:', { threads: '2' });
const c = await inst.connect();
async function q(s: string) { try { const r = await c.runAndReadAll(s); console.log(JSON.stringify(r.getRowObjectsJson()).slice(0,300)); } catch (e) { console.log('ERR', (e as Error).message); } }
await q(`set allowed_directories=['/tmp/x/']`); await q(`set enable_external_access=false`); await q(`set lock_configuration=true`);
await q(`select count(*) from read_parquet('/tmp/x/out/**/*.parquet')`);
await q(`select * from read_csv('/etc/passwd')`);
await q(`set enable_external_access=true`);
await q(`create temp view v as select * from read_parquet('/tmp/x/out/**/*.parquet')`);
const c2 = await inst.connect();
try { await c2.run('select * from v'); } catch (e) { console.log('c2 ERR', (e as Error).message); }
await q(`select * from v`);
await q(`select 9223372036854775807::bigint as big, 1::hugeint h, now() as t, [1,2] l, {'a':1} s, 1.5::decimal(5,2) d`);
