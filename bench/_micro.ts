import { jsonEventsToBatch } from '../src/ingest/jsonEvents.ts';
import { evolveSchema, rowToJsonLine } from '../src/storage/schema.ts';
import { makeLogEvents } from './logs.ts';
const events = makeLogEvents(100000, 3);
const bodies: string[] = [];
for (let i = 0; i < events.length; i += 1000) bodies.push(JSON.stringify(events.slice(i, i + 1000)));
const h = new Headers();
let schema = {};
for (let round = 0; round < 3; round++) {
  let tParse = 0, tFlat = 0, tSchema = 0, tSer = 0;
  for (const b of bodies) {
    let t = performance.now();
    const json = JSON.parse(b);
    tParse += performance.now() - t; t = performance.now();
    const batch = jsonEventsToBatch(json, h, 10);
    tFlat += performance.now() - t; t = performance.now();
    const { next } = evolveSchema(schema, batch, 2000); if (next) schema = next;
    tSchema += performance.now() - t; t = performance.now();
    let lines = ''; for (const row of batch.rows) lines += `${rowToJsonLine(row)}\n`;
    tSer += performance.now() - t;
  }
  console.log(`per 100k events: parse ${tParse.toFixed(0)}ms flatten ${tFlat.toFixed(0)}ms schema ${tSchema.toFixed(0)}ms serialize ${tSer.toFixed(0)}ms → ${(100000 / ((tParse + tFlat + tSchema + tSer) / 1000)).toFixed(0)} events/s/core`);
}
