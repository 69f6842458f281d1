#!/usr/bin/env bash
# Build the distdeck image (tag $IMAGE, default distdeck) with whichever container engine is here.
#   scripts/image.sh           build it (what `make image` runs)
#   scripts/image.sh engine    print the engine and the environment it needs, as KEY=VALUE lines
# - The engine: $ENGINE if set, else docker when its daemon answers, else podman.
# - Debian's base image: pulled; where no image registry is reachable, made from Debian's packages
#   with debootstrap (as the official image is) and imported under the same name.
# - This machine's package registries: where its pip or npm are configured (a CA bundle, an index, a
#   local folder of wheels), the build's downloads use the same settings. They are mounted only into the
#   stages that download, never copied into the image.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-distdeck}
BASE=debian:bookworm-slim
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
MOUNTED=/run/distdeck-build  # where the build sees this machine's pip/npm files
TORCH_WHEEL=torch-2.13.0+cpu-cp311-*.whl  # the Dockerfile's torch, for Debian bookworm's Python 3.11

say() { echo "image.sh: $*" >&2; }
die() { say "$*"; exit 1; }

pick_engine() {
  if [ -n "${ENGINE:-}" ]; then
    echo "$ENGINE"
  elif command -v docker >/dev/null && ! docker --version 2>/dev/null | grep -qi podman \
      && docker info >/dev/null 2>&1; then
    echo docker
  elif command -v podman >/dev/null; then
    echo podman
  else
    die "no container engine: install docker, or podman (Debian: apt-get install podman runc debootstrap)"
  fi
}

# Podman on a restricted host (a sandbox or CI container: no raising of resource limits, no systemd)
# cannot start a container with its defaults; scripts/containers.conf is the setting that works there.
# The probe needs no network: podman's default one adds a bridge with an address to the host, and a
# browser running beside it (the tests, side by side) fails its loads with ERR_NETWORK_CHANGED.
use_containers_conf_if_needed() {
  [ "$ENGINE" = podman ] && [ -z "${CONTAINERS_CONF:-}" ] || return 0
  podman run --rm --network none "$BASE" true >/dev/null 2>&1 && return 0
  export CONTAINERS_CONF=$PWD/scripts/containers.conf
  podman run --rm --network none "$BASE" true >/dev/null \
    || die "podman cannot start a container, even with $CONTAINERS_CONF (is runc installed?)"
  say "podman needs $CONTAINERS_CONF on this host (restricted resource limits, no systemd)"
}

ensure_base() {
  "$ENGINE" image inspect "$BASE" >/dev/null 2>&1 && return 0
  "$ENGINE" pull "docker.io/library/$BASE" >/dev/null 2>&1 && return 0
  say "cannot pull $BASE: making it from Debian's packages with debootstrap ($DEBIAN_MIRROR)"
  [ "$(id -u)" = 0 ] || die "debootstrap needs root: run as root, or pull $BASE where a registry is reachable"
  command -v debootstrap >/dev/null || die "debootstrap is missing (Debian: apt-get install debootstrap)"
  local root
  root=$(mktemp -d)
  debootstrap --variant=minbase bookworm "$root" "$DEBIAN_MIRROR" >/dev/null
  slim_like_the_official_image "$root"
  tar -C "$root" -c . | "$ENGINE" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$BASE" >/dev/null
  rm -rf "$root"
}

# What the official debian:bookworm-slim does to a minbase tree: the updates and security suites, no docs,
# man pages or translations (dpkg skips them in later installs too), no package lists or cached packages
# (nor later: apt cleans up after itself).
slim_like_the_official_image() {
  local root=$1
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $DEBIAN_MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  # apt deletes the packages it downloads and keeps no package cache, as in the official image.
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
  find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
}

# This machine's pip settings as pip reports them (environment and config files), one value per key by
# pip's precedence (environment, then site, user, global), written as a pip.conf.
write_pip_conf() {
  python3 -m pip config list 2>/dev/null | python3 -c '
import re, sys
rank = {":env:": 0, "site": 1, "user": 2, "global": 3}
best = {}
for line in sys.stdin:
    found = re.fullmatch(r"(:env:|site|user|global)\.([\w-]+)=(.*)", line.strip())
    if found:
        scope, key, value = found.group(1), found.group(2), found.group(3).strip("\x27\"")
        if key not in best or rank[scope] < best[key][0]:
            best[key] = (rank[scope], value)
if best:
    print("[global]")
    for key, (_, value) in sorted(best.items()):
        print(f"{key} = {value}")
' >"$1"
  [ -s "$1" ]
}

# This machine's npm registry and CA bundle, where they are not npm's defaults, written as an .npmrc.
write_npmrc() {
  local registry cafile
  registry=$(npm config get registry 2>/dev/null) || return 1
  cafile=$(npm config get cafile 2>/dev/null)
  {
    [ "$registry" = https://registry.npmjs.org/ ] || echo "registry=$registry"
    case $cafile in /*) echo "cafile=$cafile" ;; esac
  } >"$1"
  [ -s "$1" ]
}

# The local files and folders a pip.conf or .npmrc names: CA bundle, wheel folders, file:// indexes (a
# local index's simple/ pages link to files beside it, so the folder above simple/ is named).
local_paths() {
  cat "$@" | tr ' =' '\n\n' | sed 's|^file://||; s|/simple/*$||' | grep '^/' | sort -u | while read -r path; do
    if [ -e "$path" ]; then echo "$path"; fi
  done
}

holds_the_torch_wheel() {
  local dir
  for dir in $(local_paths "$1"); do
    if compgen -G "$dir/$TORCH_WHEEL" >/dev/null; then return 0; fi
  done
  return 1
}

build() {
  local settings index downloading_stage
  local -a build_args=() mounts=()
  settings=$(mktemp -d)
  trap 'rm -rf "$settings"' RETURN
  if command -v python3 >/dev/null && write_pip_conf "$settings/pip.conf"; then
    mounts+=(--volume "$settings/pip.conf:/etc/pip.conf:ro")
    # A local folder of wheels with the CPU build of torch: take it from there, through this machine's
    # index (PyPI has no +cpu build, so pip picks the local one) instead of PyTorch's index.
    if holds_the_torch_wheel "$settings/pip.conf"; then
      index=$(sed -n 's/^index-url = //p' "$settings/pip.conf")
      build_args+=(--build-arg "TORCH_INDEX_URL=${index:-https://pypi.org/simple}")
    fi
  fi
  if command -v npm >/dev/null && write_npmrc "$settings/npmrc"; then
    mounts+=(--volume "$settings/npmrc:/root/.npmrc:ro")
  fi
  # The files and folders the settings name, mounted under $MOUNTED (not at their own paths: the build's
  # own packages write some of them, e.g. ca-certificates its bundle), and the settings rewritten to match.
  for path in $(local_paths "$settings"/pip.conf "$settings"/npmrc 2>/dev/null); do
    mounts+=(--volume "$path:$MOUNTED$path:ro")
  done
  sed -i -E "s#(^|[ =])(file://)?/#\\1\\2$MOUNTED/#g" "$settings"/pip.conf "$settings"/npmrc 2>/dev/null || true

  if [ "$ENGINE" = podman ]; then
    # docker format: the OCI format has no HEALTHCHECK. Two passes: the stages that download, with this
    # machine's settings mounted; then the image from those cached stages with nothing mounted, so not
    # even an empty mount point of this machine's paths ends up in it. Stages that do not depend on each
    # other build side by side (apt, npm and pip wait mostly on the network and the disk): the two
    # downloading stages as two builds, each log line prefixed by its stage; the rest with --jobs. (docker's
    # BuildKit does so by itself.)
    if [ ${#mounts[@]} -gt 0 ]; then
      say "handing this machine's pip/npm settings to the build: ${mounts[*]}"
      local -A building=()
      for downloading_stage in vendor python; do
        podman build --format docker --network host "${mounts[@]}" "${build_args[@]}" \
          --target "$downloading_stage" . 2>&1 | sed -u "s/^/[$downloading_stage] /" &
        building[$downloading_stage]=$!
      done
      local -a failed=()
      for downloading_stage in vendor python; do
        wait "${building[$downloading_stage]}" || failed+=("$downloading_stage")
      done
      [ ${#failed[@]} -eq 0 ] || die "these stages failed to build: ${failed[*]}"
    fi
    podman build --format docker --jobs 3 "${build_args[@]}" -t "$IMAGE" .
  else
    # `docker build` cannot mount this machine's folders: it uses the Dockerfile's registries as they are.
    [ ${#mounts[@]} -eq 0 ] || say "docker build uses the public registries; this machine's pip/npm settings are not handed over"
    docker build "${build_args[@]}" -t "$IMAGE" .
  fi
}

ENGINE=$(pick_engine)
ensure_base
use_containers_conf_if_needed
case ${1:-build} in
  build) build ;;
  engine) echo "ENGINE=$ENGINE"; [ -z "${CONTAINERS_CONF:-}" ] || echo "CONTAINERS_CONF=$CONTAINERS_CONF" ;;
  *) die "usage: $0 [build|engine]" ;;
esac
