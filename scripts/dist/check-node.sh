#!/usr/bin/env bash
# make dist-check: the npm package redislock-<v>.tgz, installed as a user
# would: `npm install --offline ./redislock-<v>.tgz` in an empty project,
# with an empty npm cache (nothing from an earlier install, nothing from the
# network), no cargo on the PATH and no REDISLOCK_LIB. Then a script of that
# project requires 'redislock', takes a lock on $REDIS_URL (a throwaway
# server unless set) and checks that the installed package.json's version,
# the addon's version() and Cargo.toml's are one, and that the addon loaded
# is the one under the project's node_modules.
#
#   scripts/dist/check-node.sh DIST [INSTALL_DIR]
#
# With INSTALL_DIR the project is left at INSTALL_DIR/project (its package
# usable with NODE_PATH=INSTALL_DIR/project/node_modules); without, a
# scratch directory, removed at exit.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: scripts/dist/check-node.sh DIST [INSTALL_DIR]"; fi
dist=$(cd "$1" && pwd) || die "node: no directory $1"
tgz=$dist/redislock-$version.tgz
[ -f "$tgz" ] || die "node: no $tgz (make dist)"

# What a user's machine has: no Rust toolchain, no override of the library.
if command -v cargo >/dev/null; then die "node: cargo is on the PATH ($(command -v cargo)): run with PATH=\$(without_cargo)"; fi
[ -z "${REDISLOCK_LIB:-}" ] || die "node: REDISLOCK_LIB is set ($REDISLOCK_LIB): the check must find the bundled addon itself"
[ -z "${REDISLOCK_NODE_ADDON:-}" ] || die "node: REDISLOCK_NODE_ADDON is set ($REDISLOCK_NODE_ADDON): the check must find the bundled addon itself"
command -v node >/dev/null || die "node: no node on the PATH"
command -v npm >/dev/null || die "node: no npm on the PATH"

# The tarball itself: nothing runs at install, nothing is fetched.
# shellcheck disable=SC2016 # JavaScript, not the shell's expansions
tar -xOzf "$tgz" package/package.json | node -e '
  const pkg = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
  const problems = [];
  for (const s of ["preinstall", "install", "postinstall", "prepare", "preprepare", "postprepare"]) {
    if (pkg.scripts && pkg.scripts[s]) problems.push(`the script ${s} (${pkg.scripts[s]})`);
  }
  for (const d of ["dependencies", "optionalDependencies", "peerDependencies", "bundleDependencies", "bundledDependencies"]) {
    if (pkg[d] && Object.keys(pkg[d]).length) problems.push(`${d} ${Object.keys(pkg[d]).join(", ")}`);
  }
  if (pkg.gypfile) problems.push("gypfile: true (npm would run node-gyp)");
  if (pkg.version !== process.argv[1]) problems.push(`version ${pkg.version}, not ${process.argv[1]}`);
  if (problems.length) {
    console.error(`dist: node: the package.json in the tarball has ${problems.join("; ")}`);
    process.exit(1);
  }
' "$version" || die "node: $tgz would run or fetch something at install"
listing=$(tar -tzf "$tgz")
if grep -Eq '^package/(binding\.gyp|build\.js|crate/)' <<<"$listing"; then
  die "node: $tgz carries build files (binding.gyp, build.js or crate/): npm could build from source"
fi

work=$(scratch node-check)
project=$(kept project "$@")
# The user's copy of the artifact (downloaded, or copied from dist/): the
# project records where it came from, so not a path into the repository.
cp "$tgz" "$project/"
cat >"$project/package.json" <<'EOF'
{
  "name": "redislock-dist-check",
  "version": "1.0.0",
  "private": true
}
EOF

# An empty cache (and no user configuration): --offline finds nothing there,
# so the tarball must install with nothing else.
: >"$work/npmrc"
started=$(date +%s%N)
if ! out=$(cd "$project" && npm_config_cache=$work/npm-cache npm_config_userconfig=$work/npmrc \
  npm_config_update_notifier=false npm install --offline --no-audit --no-fund --loglevel=error \
  "./redislock-$version.tgz" 2>&1); then
  echo "$out" >&2
  die "node: npm install --offline ./redislock-$version.tgz failed in $project"
fi
install_ms=$((($(date +%s%N) - started) / 1000000))
installed=$project/node_modules/redislock
[ -f "$installed/package.json" ] || die "node: npm install left no $installed/package.json"
if grep -rIlF "$root" "$project" --exclude="redislock-$version.tgz"; then
  die "node: the files above, installed in $project, name the repository $root"
fi

ensure_redis

cat >"$project/check.js" <<'EOF'
'use strict';
// Run from the project: require('redislock') as an application does.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const [expected] = process.argv.slice(2);
const main = require.resolve('redislock');
const dir = fs.realpathSync(path.dirname(main));
const here = fs.realpathSync(path.join(__dirname, 'node_modules', 'redislock'));
assert.equal(dir, here, `require('redislock') resolved to ${main}, not the project's node_modules`);

const redislock = require('redislock');
const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
assert.equal(pkg.version, expected, `the installed package.json says ${pkg.version}`);

// The objects this process loaded: the addon must be the installed one, and
// the only redislock object (no system libredislock.so, no build tree).
const maps = fs.readFileSync('/proc/self/maps', 'utf8');
const loaded = [...new Set(maps.split('\n').map((l) => l.split(/\s+/).slice(5).join(' ')).filter((f) => /redislock/.test(path.basename(f))))];
const addon = path.join(dir, 'redislock.linux-x64-gnu.node');
assert.deepEqual(loaded, [addon], `redislock objects mapped: ${loaded.join(', ') || 'none'}`);
const reported = process.report.getReport().sharedObjects.filter((f) => /redislock/.test(path.basename(f)));
assert.deepEqual(reported, [addon], `process.report's shared objects: ${reported.join(', ')}`);
// The module index.js loaded (require caches it by its file name).
const addonVersion = require(addon).version();
assert.equal(addonVersion, expected, `the addon ${addon} is version ${addonVersion}`);

(async () => {
  const client = new redislock.Client(process.env.REDIS_URL);
  const name = `dist-check:node:${process.pid}`;
  const lock = await client.acquire(name, { ttl: 10000, wait: 5000 });
  assert.equal(typeof (await lock.drawFence()), 'number');
  assert.equal(await lock.owned(), true);
  assert.equal(await client.tryAcquire(name), null, 'a second acquisition while the lock is held');
  await lock.release();
  const again = await client.tryAcquire(name);
  assert.ok(again, 'the lock is free after its release');
  await again.release();
  console.log(JSON.stringify({ version: pkg.version, addonVersion, addon, fence: lock.fence }));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
EOF

# Only the project: no NODE_PATH, no NODE_OPTIONS.
result=$(cd "$project" && env -u NODE_PATH -u NODE_OPTIONS node check.js "$version") ||
  die "node: require('redislock') from $project failed (see above)"
# The ESM entry of the exports map: the same objects as require's, and a lock.
cat >"$project/check.mjs" <<'EOF'
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as esm from 'redislock';

const cjs = createRequire(import.meta.url)('redislock');
assert.equal(esm.Client, cjs.Client, "import's Client is not require's");
assert.equal(esm.LockError, cjs.LockError, "import's LockError is not require's");
const client = new esm.Client(process.env.REDIS_URL);
const lock = await client.tryAcquire(`dist-check:node-esm:${process.pid}`, { ttl: 10000 });
assert.ok(lock, 'import: the lock was not taken');
await lock.release();
await client.close();
EOF
(cd "$project" && env -u NODE_PATH -u NODE_OPTIONS node check.mjs) ||
  die "node: import 'redislock' from $project failed (see above)"
size=$(stat -c %s "$tgz")
addon_size=$(stat -c %s "$installed/redislock.linux-x64-gnu.node")
echo "node: npm install --offline redislock-$version.tgz ($size bytes; addon $addon_size bytes) in $((install_ms / 1000)).$(printf %03d $((install_ms % 1000))) s;" \
  "require('redislock') $version with its addon $(node -e 'console.log(JSON.parse(process.argv[1]).addonVersion)' "$result")" \
  "from node_modules, by require and by import; a lock taken and released on $REDIS_URL"
if [ $# -eq 2 ]; then echo "node: installed in $project (NODE_PATH=$project/node_modules)"; fi
