'use strict';
// A child of child_process.fork for processes.test.js: its own Client of
// the URL in argv, answering the parent's messages ('try', 'take').
const { Client } = require('..');

const [url, key] = process.argv.slice(2);
const client = new Client(url);
process.on('message', async (m) => {
  if (m === 'try') process.send(String((await client.tryAcquire(key)) === null));
  if (m === 'take') {
    const lock = await client.acquire(key, { wait: 60000, fenced: true });
    process.send(`took ${lock.fence}`);
    await lock.release();
    process.disconnect();
  }
});
process.send('ready');
