'use strict';
// The `ioredis` that node-redlock's tests import (run.js puts this module
// where they look for it): ioredis 4 itself, except that the hosts the tests
// name (docker-compose service names upstream, and 127.0.0.1 on the default
// port 6379 for a server that is not there) lead to the throwaway servers
// run.js started on free loopback ports, and to a free port where nothing
// listens. A host it was not told about is refused: the tests reach no other
// server.

const real = require(process.env.REDLOCK_SUITE_IOREDIS);

/** "host" or "host:port" -> the loopback port to use instead. */
const PORTS = JSON.parse(process.env.REDLOCK_SUITE_HOSTS || '{}');

function moved(host = 'localhost', port = 6379) {
  const to = PORTS[`${host}:${port}`] ?? PORTS[host];
  if (to === undefined) throw new Error(`node-redlock's tests must not reach ${host}:${port}: run.js gave no server for it`);
  return { host: '127.0.0.1', port: to };
}

class Redis extends real {
  constructor(options) {
    if (options === null || typeof options !== 'object') throw new TypeError('the tests name their servers by { host }');
    super({ ...options, ...moved(options.host, options.port) });
  }
}

class Cluster extends real.Cluster {
  constructor(startupNodes, options) {
    super(
      startupNodes.map((n) => moved(n.host, n.port)),
      options,
    );
  }
}

module.exports = Redis;
module.exports.default = Redis;
module.exports.Redis = Redis;
module.exports.Cluster = Cluster;
