#!/usr/bin/env bash
# make dist: the npm package, redislock-<v>.tgz: index.js, index.d.ts and the
# stage's stripped Node.js addon as redislock.linux-x64-gnu.node (napi-rs's
# name, which index.js looks for next to itself, after $REDISLOCK_NODE_ADDON),
# with a package.json that has no install script and no dependencies: it
# installs offline, with no Rust toolchain.
#
#   scripts/dist/npm.sh STAGE DIST
#
# The package.json is bindings/node/package.json (the source package's,
# whose install script builds the addon with cargo) with its scripts
# dropped, "files" naming what ships, and os/cpu/libc set, so that npm
# refuses it on another platform instead of installing an addon that cannot
# load. Packed by `npm pack` in a scratch copy, never in the repository
# (npm's fixed file times and order: the same inputs give the same bytes).
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

[ $# -eq 2 ] || die "usage: scripts/dist/npm.sh STAGE DIST"
stage=$1
dist=$2
addon=$stage/node/redislock.node
platform=linux-x64-gnu
name=redislock-$version.tgz

[ -f "$addon" ] || die "npm: no $addon (scripts/dist.sh makes the stage)"
[ -d "$dist" ] || die "npm: no directory $dist"
command -v npm >/dev/null || die "npm: no npm command (apt-get install npm, or Node.js from nodejs.org)"

# What goes in must be what its name says: x86_64, a shared object, stripped.
shipped_elf npm "$addon"
symbols=$(readelf -W --dyn-syms "$addon")
grep -q ' napi_register_module_v1$' <<<"$symbols" ||
  die "npm: $addon is not a Node.js addon (no napi_register_module_v1)"

work=$(scratch npm)
pkg=$work/package
mkdir -p "$pkg"
install -m 0644 "$root/bindings/node/index.js" "$root/bindings/node/index.d.ts" \
  "$root/bindings/node/index.mjs" "$root/bindings/node/index.d.mts" "$pkg/"
install -m 0755 "$addon" "$pkg/redislock.$platform.node"

node - "$root/bindings/node/package.json" "$pkg/package.json" "$version" "$platform" <<'EOF'
const fs = require('node:fs');
const [source, target, version, platform] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(source, 'utf8'));
if (pkg.version !== version) {
  console.error(`dist: npm: ${source} says version ${pkg.version}, Cargo.toml ${version}`);
  process.exit(1);
}
// Nothing runs at install, nothing is fetched.
for (const key of ['scripts', 'dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies', 'bundleDependencies', 'bundledDependencies', 'gypfile']) {
  delete pkg[key];
}
pkg.files = ['index.js', 'index.d.ts', 'index.mjs', 'index.d.mts', `redislock.${platform}.node`, 'README.md', 'LICENSE-MIT', 'LICENSE-APACHE'];
pkg.os = ['linux'];
pkg.cpu = ['x64'];
pkg.libc = ['glibc'];
fs.writeFileSync(target, `${JSON.stringify(pkg, null, 2)}\n`);
EOF

install -m 0644 "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$pkg/"
cat >"$pkg/README.md" <<EOF
# redislock $version for Node.js

One Redis distributed lock for Node.js, C, Python, PHP and Ruby: fenced,
fair, with hand-off instead of polling. A Node.js process takes the same
lock, the same way, as the other languages' processes of a fleet.

This package carries the prebuilt native addon for x86_64 Linux with glibc
2.17 or newer (\`redislock.$platform.node\`): it installs with no Rust
toolchain, runs no install script and has no dependencies. Node.js 18 or
newer.

\`\`\`js
const { Client } = require('redislock');
const client = new Client('redis://127.0.0.1:6379/0');
await client.using('reports', { ttl: 30000, wait: 10000 }, async (signal, lock) => {
  // the lock is held (and renewed) here; await lock.drawFence() is its fencing number
});
\`\`\`

Other platforms build the addon from the source (the repository's
\`make node\`). The guide is docs/node.md of the repository.
EOF
chmod 0644 "$pkg/package.json" "$pkg/README.md"

# npm writes its logs into its cache: a scratch one, and nothing from the network.
if ! out=$(cd "$pkg" && npm_config_cache=$work/cache npm pack --offline --ignore-scripts --no-fund --no-audit \
  --loglevel=error --json --pack-destination "$work" 2>&1); then
  echo "$out" >&2
  die "npm: npm pack failed"
fi
made=$(node -e 'const r = JSON.parse(process.argv[1]); console.log(r[0].filename)' "$out") ||
  die "npm: could not read npm pack's output: $out"
[ -f "$work/$made" ] || die "npm: npm pack made no $work/$made"

# Read back from the tarball: the files, and no install script.
listing=$(tar -tzf "$work/$made") || die "npm: $made is not a tar.gz"
for f in index.js index.d.ts index.mjs index.d.mts "redislock.$platform.node" package.json README.md LICENSE-MIT LICENSE-APACHE; do
  grep -qx "package/$f" <<<"$listing" || die "npm: package/$f is missing from $made"
done
# shellcheck disable=SC2016 # JavaScript, not the shell's expansions
tar -xOzf "$work/$made" package/package.json | node -e '
  const pkg = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
  const bad = ["preinstall", "install", "postinstall", "prepare"].filter((s) => pkg.scripts && pkg.scripts[s]);
  if (bad.length || pkg.dependencies) {
    console.error(`dist: npm: the packed package.json has ${bad.length ? `scripts ${bad}` : "dependencies"}`);
    process.exit(1);
  }
  if (pkg.version !== process.argv[1]) process.exit(1);
' "$version" || die "npm: the packed package.json is not right"

mv -f "$work/$made" "$dist/$name"
echo "dist: $dist/$name ($(stat -c %s "$dist/$name") bytes, the addon redislock.$platform.node inside)"
