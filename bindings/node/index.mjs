// redislock for Node.js, as an ES module: `import { Client } from 'redislock'`.
// The same objects as require('redislock') gives (index.js is loaded once,
// whichever way it is asked for), so that a class or an error made through
// one is the same as through the other.
import redislock from './index.js';

export const {
  Client,
  Lock,
  LockError,
  LockTimeoutError,
  LockNotOwnedError,
  LockUnconfirmedError,
  LockWrongTypeError,
  LockQuorumError,
  LockConnectionError,
  LockServerError,
  DEFAULT_TTL,
  eventLoop,
} = redislock;

export default redislock;
