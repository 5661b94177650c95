#!/usr/bin/env bash
# Prepare podman on a host without Docker, then build the images of deploy/docker-compose.yml:
#   1. a containers.conf for this host (runc, cgroupfs, default ulimits no higher than the host's own);
#   2. the Python base image: python:3.11-slim-bookworm if it can be pulled, else one built from Debian's
#      packages (debootstrap minbase + python3, python3-venv) and imported; kept between runs;
#   3. the nginx image: nginx:1.27-alpine if it can be pulled, else one built from Debian's nginx package;
#   4. the server image from the Dockerfile, with build arguments for what differs here (base image, where pip
#      finds torch and which CA bundle it trusts). Layer caching keeps a rebuild short.
#
# Usage (as root):  bash deploy/podman/prepare.sh      then: export CONTAINERS_CONF=build/podman/containers.conf
# Settings (environment): MT_IMAGE (mt-server:cpu), MT_NGINX_IMAGE, PYTHON_IMAGE, TORCH_INDEX_URL,
# PIP_FIND_LINKS and PIP_CERT (default: pip's own configuration), DEBIAN_MIRROR. See docs/deployment.md.
set -euo pipefail
shopt -s inherit_errexit
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/deploy/podman"
STATE="$ROOT/build/podman"
export CONTAINERS_CONF="$STATE/containers.conf"  # the project's own: the host's configuration stays as it is

SUITE=bookworm
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
MT_IMAGE="${MT_IMAGE:-mt-server:cpu}"
LOCAL_PYTHON=localhost/mt-python:3.11-$SUITE
LOCAL_NGINX=localhost/mt-nginx:$SUITE
OFFICIAL_PYTHON=docker.io/library/python:3.11-slim-$SUITE
OFFICIAL_NGINX=docker.io/library/nginx:1.27-alpine
TORCH_DEFAULT_INDEX=https://download.pytorch.org/whl/cpu

log() { printf '[prepare] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

check_host() {
  [ "$(id -u)" = 0 ] || die "run as root (rootful podman; see docs/deployment.md)"
  local missing=()
  for cmd in podman runc debootstrap; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
  [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: apt-get install podman buildah runc debootstrap"
}

write_containers_conf() {
  # crun refuses some cgroup v1 layouts. Podman's default ulimits (nofile 1048576) are more than a host without
  # CAP_SYS_RESOURCE (a container or a sandboxed VM) may grant, so take the host's own hard limits; podman
  # itself lowers its NPROC to kernel.pid_max at start, so no more than that either.
  local nofile nproc
  nofile="$(ulimit -Hn)"
  nproc="$(ulimit -Hu)"
  local pid_max
  pid_max="$(cat /proc/sys/kernel/pid_max)"
  if [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; then nproc="$pid_max"; fi
  [ "$nofile" != unlimited ] || nofile=1048576
  mkdir -p "$(dirname "$CONTAINERS_CONF")"
  cat >"$CONTAINERS_CONF" <<EOF
# Written by deploy/podman/prepare.sh for this host; used through CONTAINERS_CONF.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  log "containers.conf: $CONTAINERS_CONF"
}

have_image() { podman image exists "$1"; }

pull() {
  # A registry that cannot be reached fails within seconds; say so and go on.
  timeout 300 podman pull -q "$1" >/dev/null 2>&1 || { log "cannot pull $1"; return 1; }
}

debian_python_image() {
  # Debian's python3 (3.11 in bookworm) in a minimal root file system; documentation and apt lists dropped.
  local rootfs
  rootfs="$(mktemp -d /var/tmp/mt-rootfs.XXXXXX)"
  log "debootstrap $SUITE (minbase + python3) from $DEBIAN_MIRROR"
  debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    "$SUITE" "$rootfs" "$DEBIAN_MIRROR" >"$STATE/debootstrap.log" 2>&1 \
    || die "debootstrap failed: see $STATE/debootstrap.log"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
  tar -C "$rootfs" --numeric-owner -c . | podman import -q \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' - "$LOCAL_PYTHON" >/dev/null
  rm -rf "$rootfs"
}

find_image() {
  # The image to use: the one given, else the official one or the local build when present, else the official
  # one if it can be pulled. Status 1 when the local one has to be built.
  local given="$1" official="$2" local_image="$3"
  if [ -n "$given" ]; then echo "$given"; return; fi
  for image in "$official" "$local_image"; do
    if have_image "$image"; then echo "$image"; return; fi
  done
  if pull "$official"; then echo "$official"; return; fi
  return 1
}

python_image() {
  # The base image for the Dockerfile's PYTHON_IMAGE, built here once and kept when there is no other.
  find_image "${PYTHON_IMAGE:-}" "$OFFICIAL_PYTHON" "$LOCAL_PYTHON" && return
  debian_python_image
  echo "$LOCAL_PYTHON"
}

nginx_image() {
  # The image the compose file's nginx service runs (MT_NGINX_IMAGE), built from Debian's when there is no other.
  find_image "${MT_NGINX_IMAGE:-}" "$OFFICIAL_NGINX" "$LOCAL_NGINX" && return
  log "building $LOCAL_NGINX from Debian's nginx package"
  podman build --network host --format docker --build-arg "BASE_IMAGE=$1" -t "$LOCAL_NGINX" \
    -f "$HERE/nginx.Containerfile" "$HERE" >"$STATE/nginx-build.log" 2>&1 \
    || die "nginx image build failed: see $STATE/nginx-build.log"
  echo "$LOCAL_NGINX"
}

pip_setting() {
  # A pip setting from the environment (PIP_NAME) or pip's configuration files, empty when unset.
  local env="PIP_${1^^}"
  env="${env//-/_}"
  if [ -n "${!env:-}" ]; then echo "${!env}"; return; fi
  python3 -m pip config get "global.$1" 2>/dev/null || true
}

reachable() {
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' "$1" >/dev/null 2>&1
}

server_image() {
  # The Dockerfile, unchanged; what differs on this host comes in as build arguments and read-only mounts.
  local args=(--network host --layers --format docker --build-arg "PYTHON_IMAGE=$1" -t "$MT_IMAGE" -f "$ROOT/Dockerfile")
  local links cert index="${TORCH_INDEX_URL:-}"
  links="$(pip_setting find-links)"
  cert="$(pip_setting cert)"
  if [ -n "$links" ] && [ -d "$links" ]; then
    args+=(-v "$links:/mnt/find-links:ro" --build-arg PIP_FIND_LINKS=/mnt/find-links)
  fi
  if [ -n "$cert" ] && [ -f "$cert" ]; then
    args+=(-v "$cert:/mnt/pip-cert.pem:ro" --build-arg PIP_CERT=/mnt/pip-cert.pem)
  fi
  if [ -z "$index" ] && ! reachable "$TORCH_DEFAULT_INDEX/torch/"; then
    # The PyTorch index is out of reach: torch must come from the local wheel directory, never from PyPI
    # (PyPI's Linux torch is the CUDA build, gigabytes).
    ls "$links"/torch-*+cpu-*.whl >/dev/null 2>&1 \
      || die "$TORCH_DEFAULT_INDEX is unreachable and no torch-*+cpu wheel in PIP_FIND_LINKS ($links)"
    index=https://pypi.org/simple
    log "torch: $TORCH_DEFAULT_INDEX unreachable, the CPU wheel from $links"
  fi
  [ -z "$index" ] || args+=(--build-arg "TORCH_INDEX_URL=$index")
  log "building $MT_IMAGE (base $1)"
  podman build "${args[@]}" "$ROOT" >"$STATE/build.log" 2>&1 || { tail -30 "$STATE/build.log"; die "build failed"; }
}

main() {
  check_host
  mkdir -p "$STATE"
  write_containers_conf
  local python nginx
  python="$(python_image)"
  log "python base: $python"
  nginx="$(nginx_image "$python")"
  log "nginx: $nginx"
  server_image "$python"
  echo "MT_NGINX_IMAGE=$nginx" >"$STATE/images.env"
  echo "MT_IMAGE=$MT_IMAGE" >>"$STATE/images.env"
  log "$(podman image inspect --format '{{.Size}}' "$MT_IMAGE" | awk '{printf "%s: %.0f MB", "'"$MT_IMAGE"'", $1/1e6}')"
}

main "$@"
