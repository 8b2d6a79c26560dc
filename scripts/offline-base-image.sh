#!/usr/bin/env bash
# Makes the Dockerfile's base image, docker.io/library/node:20-bookworm-slim, on a machine that
# reaches Debian's packages and the npm registry but no image registry: a minimal Debian bookworm
# from debootstrap, with this machine's Node.js 20 (node, npm, its headers for native modules), this
# machine's CA bundle (NODE_EXTRA_CA_CERTS: npm inside the build reaches the registry through it) and
# the user `node` (uid 1000), laid out as the official image is. Needs root, debootstrap and podman
# (or docker: CONTAINER=docker). Skips the work when the image is there already, unless --force.
#
#   scripts/offline-base-image.sh [--force]
set -euo pipefail

IMAGE="docker.io/library/node:20-bookworm-slim"
CONTAINER="${CONTAINER:-podman}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ "${1:-}" != "--force" ] && "$CONTAINER" image exists "$IMAGE" 2>/dev/null; then
  echo "offline-base-image: $IMAGE is there already (--force makes it again)"
  exit 0
fi
node_bin="$(command -v node)"
if ! "$node_bin" --version | grep -q '^v20\.'; then
  echo "offline-base-image: this machine's node is $("$node_bin" --version), not 20; install Node.js 20 first" >&2
  exit 1
fi
npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
headers="$(dirname "$(dirname "$node_bin")")/include/node"
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
echo "offline-base-image: debootstrap bookworm into $root (about 30 s)"
debootstrap --variant=minbase bookworm "$root" "$MIRROR" >/dev/null

install -D -m 0755 "$node_bin" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/lib/node_modules" "$root/usr/local/include"
cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
if [ -d "$headers" ]; then cp -a "$headers" "$root/usr/local/include/node"; fi
install -D -m 0644 "$ca_bundle" "$root/etc/ssl/certs/ca-certificates.crt"
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin

echo "offline-base-image: importing as $IMAGE"
tar -C "$root" -c . | "$CONTAINER" import \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt" \
  --change 'CMD ["node"]' \
  - "$IMAGE" >/dev/null
echo "offline-base-image: done"
