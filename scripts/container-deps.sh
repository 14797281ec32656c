#!/usr/bin/env bash
# Install what the local backend needs to run each instance in a container of its image (rootful
# podman with runc), and write the console's own podman configuration under var/containers/.
#
# Idempotent and fast when everything is in place (one dpkg query, two small files compared).
# Every podman/buildah/skopeo call the console makes reads this configuration through
# CONTAINERS_CONF and CONTAINERS_STORAGE_CONF (providers/local/runtime/podman.py), so the host's
# own /etc/containers is never changed and the image store lives under var/containers/storage.
#
# Why these settings (shared/notes/containers.md): crun fails on cgroup v1 "hybrid" hosts, so the
# runtime is runc; with no systemd as PID 1 the cgroup manager is cgroupfs; root may lack
# CAP_SYS_RESOURCE, so the default ulimits stay below the hard limits (else setrlimit fails);
# overlay on ext4 is fast, fuse-overlayfs is not.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CONF_DIR="${CONTAINERS_DIR:-$ROOT/var/containers}"
PACKAGES=(podman runc buildah skopeo uidmap mmdebstrap netavark slirp4netns iptables docker-registry tini)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "container-deps: ${missing[*]} missing and this is not root: install them with apt-get" >&2
    exit 1
  fi
  echo "container-deps: installing ${missing[*]} (Debian's packages, about 10 s)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # docker-registry's package starts a system service on hosts with systemd: the console runs its
  # own registry under var/ and never uses that one.
fi

mkdir -p "$CONF_DIR/storage" "$CONF_DIR/run" "$CONF_DIR/tmp"
ulimit_nofile="$(ulimit -Hn)"
[ "$ulimit_nofile" = unlimited ] && ulimit_nofile=1048576
[ "$ulimit_nofile" -gt 20000 ] && ulimit_nofile=20000

write_if_changed() {  # path, content: rewrite only when different (keeps the file's mtime otherwise)
  local path="$1" content="$2"
  if [ ! -f "$path" ] || [ "$(cat "$path")" != "$content" ]; then
    printf '%s\n' "$content" >"$path.tmp" && mv "$path.tmp" "$path"
  fi
}

write_if_changed "$CONF_DIR/containers.conf" "# Written by scripts/container-deps.sh: the console's podman settings (CONTAINERS_CONF).
[containers]
default_ulimits = [\"nofile=$ulimit_nofile:$ulimit_nofile\", \"nproc=32768:32768\"]
log_driver = \"k8s-file\"
log_size_max = 10485760
pids_limit = 1024
# tini is PID 1 in the contract's images; the console's start script brings its own when it is missing.
init = false

[engine]
runtime = \"runc\"
cgroup_manager = \"cgroupfs\"
events_logger = \"file\"
events_logfile_path = \"$CONF_DIR/run/events.log\"
tmp_dir = \"$CONF_DIR/tmp\"
num_locks = 2048

[network]
network_backend = \"netavark\"
network_config_dir = \"$CONF_DIR/networks\""

write_if_changed "$CONF_DIR/storage.conf" "# Written by scripts/container-deps.sh: the console's image store (CONTAINERS_STORAGE_CONF).
[storage]
driver = \"overlay\"
graphroot = \"$CONF_DIR/storage\"
runroot = \"$CONF_DIR/run/storage\"

[storage.options.overlay]
mountopt = \"nodev\""

command -v podman >/dev/null && command -v runc >/dev/null
