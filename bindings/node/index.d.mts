// The declarations of index.mjs: those of index.js (index.d.ts), which it
// re-exports, and its default export, the whole module.
import * as redislock from './index.js';

export * from './index.js';
export default redislock;
