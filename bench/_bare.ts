import { bareHttpRate } from './limits.ts';
import { makeLogEvents } from './logs.ts';
const singles = makeLogEvents(20000, 7).map((e) => JSON.stringify(e));
for (let i = 0; i < 2; i++) {
  const c0 = process.cpuUsage();
  const r = await bareHttpRate(singles, 32);
  const c = process.cpuUsage(c0);
  console.log(`bare ${r.toFixed(0)} req/s, client ${((c.user + c.system) / 20000).toFixed(1)} µs/req (user ${(c.user / 20000).toFixed(1)})`);
}
