#!/usr/bin/env bash
# A real multi-node Slurm cluster on this host, for the Slurm backend's tests and `make run`:
#
#   scripts/slurm-cluster.sh [start]      install Debian's Slurm if missing, write the config, start it all
#   scripts/slurm-cluster.sh stop         cancel every job, wait until their processes are gone, stop
#                                         every daemon of this cluster (its state is kept)
#   scripts/slurm-cluster.sh status       say what runs; exit 0 only when the whole cluster is up
#   scripts/slurm-cluster.sh env          print the environment a client needs (SLURM_CONF=...)
#   scripts/slurm-cluster.sh node-stop gpu03 / node-start gpu03
#                                         stop or start one node's slurmd (the tests' "node died")
#
# Debian's Slurm 22.05 (munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin, from apt)
# runs SLURM_LOCAL_NODES nodes gpu01..gpuNN, each one `slurmd -N gpuNN` on 127.0.0.1 with its own port
# and spool, and SLURM_LOCAL_GPUS simulated GPUs of GRES type SLURM_LOCAL_GPU_TYPE: gres.conf names
# character devices of the NVIDIA driver's major number (AutoDetect=off), so Slurm allocates and binds them and
# a job's CUDA_VISIBLE_DEVICES is set exactly as on a real GPU node. slurmrestd serves the REST API
# on 127.0.0.1:SLURM_LOCAL_REST_PORT with JWT authentication (as nobody: it refuses to run as root).
#
# Everything lives under var/slurm/ (config, state, spool, logs, pid files, its own munge key and
# socket) and uses ports of its own (controller 16817, nodes 17001..), so a system Slurm or munge on
# the same host is neither used nor disturbed. Idempotent: a second `start` that finds everything
# running returns at once; a changed config restarts the daemons. Needs root (slurmd runs jobs as
# their users; apt-get installs the packages).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The real path: the config reads the same from every worktree whose var/ links to this one.
BASE="$(readlink -f "${SLURM_LOCAL_DIR:-$ROOT/var/slurm}")"
NODES="${SLURM_LOCAL_NODES:-3}"
GPUS="${SLURM_LOCAL_GPUS:-8}"
GPU_TYPE="${SLURM_LOCAL_GPU_TYPE:-h200}"
CPUS="${SLURM_LOCAL_CPUS:-8}"
CTLD_PORT="${SLURM_LOCAL_CTLD_PORT:-16817}"
NODE_PORT_LOW="${SLURM_LOCAL_NODE_PORT:-17001}"
REST_PORT="${SLURM_LOCAL_REST_PORT:-6820}"
CLUSTER="${SLURM_LOCAL_CLUSTER:-console-local}"
# The Unix users of the console's tenants, whose processes a stop leaves none of.
TENANT_PREFIX="${SLURM_LOCAL_TENANT_PREFIX:-gpuc-t}"
# Seconds a preempted interruptible job gets between SIGTERM (its checkpoint) and the kill; short
# here so the tests are fast (a production site gives the console's INSTANCES_PREEMPTION_GRACE_S).
GRACE="${SLURM_LOCAL_GRACE_S:-5}"
PACKAGES=(munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin)

ETC="$BASE/etc"
RUN="$BASE/run"
LOG="$BASE/log"
MUNGE="$BASE/munge"
CONF="$ETC/slurm.conf"
# slurmrestd runs as nobody and must read slurm.conf: when the checkout is not world-traversable (a
# clone under /root), it gets a copy under /run instead.
REST_ETC="/run/console-slurm-$(printf %s "$BASE" | md5sum | cut -c1-12)"

node_names() { for i in $(seq 1 "$NODES"); do printf 'gpu%02d\n' "$i"; done; }
last_node() { printf 'gpu%02d' "$NODES"; }

say() { echo "slurm-cluster: $*"; }
die() { echo "slurm-cluster: $*" >&2; exit 1; }

pid_alive() { # pidfile
  [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

port_listens() { # port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

client_env() {
  echo "SLURM_CONF=$CONF"
  # The Python the tenants' jobs run, when the console's own is out of their reach (tenant_python).
  if [[ -x "$BASE/venvs/console/bin/python3" ]]; then echo "SLURM_LOCAL_PYTHON=$BASE/venvs/console/bin/python3"; fi
  if [[ -x "$BASE/venvs/jupyter/bin/jupyter" ]]; then echo "SLURM_LOCAL_JUPYTER=$BASE/venvs/jupyter/bin/jupyter"; fi
}

# --- install -------------------------------------------------------------------------------------------

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  [[ $(id -u) -eq 0 ]] || die "installing ${missing[*]} needs root"
  command -v apt-get >/dev/null || die "apt-get not found: install ${missing[*]} by hand"
  say "installing ${missing[*]} (apt-get)"
  # RUNLEVEL=1: the packages' scripts must not start the system's own munge/slurm services.
  apt-get update -qq
  RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# --- config --------------------------------------------------------------------------------------------

write_if_changed() { # path (content on stdin); prints "changed" when it was
  local tmp
  tmp="$(mktemp "$1.XXXX")"
  cat >"$tmp"
  if [[ -f "$1" ]] && cmp -s "$tmp" "$1"; then
    rm -f "$tmp"
  else
    mv "$tmp" "$1"
    chmod 644 "$1"
    echo changed
  fi
}

write_config() {
  mkdir -p "$ETC" "$RUN" "$LOG" "$BASE/state" "$BASE/spool" "$BASE/dev" "$MUNGE"
  chmod 755 "$BASE" "$ETC"
  local n changed="" hostname
  hostname="$(hostname -s)"
  # Simulated cards: character devices with the NVIDIA driver's major number (195) and the card's
  # index as minor, which Slurm can stat and bind (regular files and a bare Count= make it drop the
  # GPUs). Not symlinks to /dev/null, as they once were: with ConstrainDevices, Slurm denies a job the
  # cards it was not given, by major:minor, and that denied /dev/null itself (slurmstepd then fails
  # with "Could not open stdin file /dev/null: Operation not permitted"). Without the driver, opening
  # one answers ENXIO; nothing here opens them.
  for i in $(seq 0 $((GPUS - 1))); do
    if [[ ! -c "$BASE/dev/nvidia$i" ]] || [[ -L "$BASE/dev/nvidia$i" ]]; then
      rm -f "$BASE/dev/nvidia$i"
      mknod -m 666 "$BASE/dev/nvidia$i" c 195 "$i"
    fi
  done
  if [[ ! -s "$ETC/jwt.key" ]]; then
    (umask 077 && dd if=/dev/urandom bs=32 count=1 status=none >"$ETC/jwt.key")
  fi
  chmod 600 "$ETC/jwt.key"
  changed+=$(write_if_changed "$CONF" <<EOF
# Written by scripts/slurm-cluster.sh: a ${NODES}-node cluster on this host (edit the script, not this file).
ClusterName=$CLUSTER
SlurmctldHost=$hostname(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire=5: a requeued job (preempted, or its node failed) may start again 6 s later instead
# of the 121 s the default credential lifetime holds it back.
AuthInfo=socket=$MUNGE/munge.socket,cred_expire=5
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$ETC/jwt.key
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# Limits and clean-up from the kernel's cgroups (see cgroup.conf below): every job's processes are in
# its own cgroup, which Slurm kills as a whole on scancel (nothing of an instance outlives its job),
# and its memory (--mem) and devices (its GRES) are enforced there.
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
# Memory is a consumable resource, so a job's --mem becomes its cgroup's limit (with CR_Core alone
# Slurm allocates 0 MB and the limit is the whole host's). A job that names none gets DefMemPerCPU.
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
GresTypes=gpu
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
# The nodes report the CPUs configured here, whatever this host has.
SlurmdParameters=config_overrides
# A node whose slurmd stops is NOT_RESPONDING within seconds and DOWN after SlurmdTimeout; its
# requeueable jobs go back in the queue at once and run elsewhere (the README's Slurm section: the
# trade-off of short timeouts). Detection follows MessageTimeout more than SlurmdTimeout.
SlurmdTimeout=5
MessageTimeout=3
KillWait=5
# Preemption with requeue, by partition: the on-demand partition (gpu, PriorityTier=2) takes cards
# from jobs of the interruptible one (spot, PriorityTier=1) over the same nodes. A preempted job gets
# SIGTERM (its job step runs the instance's checkpoint command), GraceTime seconds, then the kill,
# and goes back in the queue with the same job id; it runs again when cards free up.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=0
InactiveLimit=0
MinJobAge=300
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
NodeName=gpu[01-$(printf %02d "$NODES")] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$NODE_PORT_LOW-$((NODE_PORT_LOW + NODES - 1))] CPUs=$CPUS RealMemory=64000 Gres=gpu:$GPU_TYPE:$GPUS State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=2 PreemptMode=OFF
PartitionName=spot Nodes=ALL MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=REQUEUE GraceTime=$GRACE
EOF
)
  changed+=$(write_if_changed "$ETC/cgroup.conf" <<EOF
# Written by scripts/slurm-cluster.sh. This host is cgroup v1 "hybrid" (v1 controllers under
# /sys/fs/cgroup/<controller>, a v2 mount at /sys/fs/cgroup/unified with no controllers), with no
# systemd as PID 1 and root without CAP_SYS_RESOURCE: Slurm's v1 plugin, on the controllers as mounted
# (CgroupAutomount finds them there; nothing to mount), creates slurm/uid_<uid>/job_<id>/step_<n>.
CgroupPlugin=cgroup/v1
CgroupAutomount=yes
CgroupMountpoint=/sys/fs/cgroup
# The job's memory (--mem) is a hard limit: a process over it is killed by the kernel's OOM killer
# and the instance says so (providers/slurm/job.py reads the job cgroup's oom_kill count).
ConstrainRAMSpace=yes
AllowedRAMSpace=100
ConstrainSwapSpace=yes
AllowedSwapSpace=0
# Only the job's own cards (its GRES device files) can be opened.
ConstrainDevices=yes
# The job's cores (--cpus-per-task) as a cpuset. On a real node that pins the job to its cores. Here
# the simulated nodes claim SLURM_LOCAL_CPUS cores each, three nodes on one host with fewer CPUs
# (2 where this was written): a job given cores the host has is pinned to them (cpuset "0"), while
# one given cores beyond them gets every CPU of the host (seen: cores 4-7 of gpu02 -> cpuset "0-1").
# So cores are enforced only where they exist, and three nodes share the host's CPUs.
ConstrainCores=yes
EOF
)
  changed+=$(write_if_changed "$ETC/gres.conf" <<EOF
# Simulated GPUs: character devices 195:<index> (no driver behind them).
AutoDetect=off
Name=gpu Type=$GPU_TYPE File=$BASE/dev/nvidia[0-$((GPUS - 1))]
EOF
)
  if [[ -n "$changed" ]]; then echo changed; fi
}

# --- the tenants' Python ------------------------------------------------------------------------------

# Jobs run as each tenant's own Unix user (gpuc-t<N>, never root), and they run the console's job
# program and JupyterLab with the console's virtualenvs. Where those point at an interpreter no
# unprivileged user may reach (pyenv under a 0700 /root), the tenants get a copy of the interpreter
# under $BASE/python and twin virtualenvs under $BASE/venvs that use it and share the packages
# (site-packages is a symlink; the scripts' first lines name the twin). Opening /root is not an
# option: it holds the host's own secrets. A production cluster instead installs the console and its
# Python where every node's users can read them (the backend's PYTHON and CONSOLE_DIR).
venv_twin() { # source-venv name
  local src="$1" dst="$BASE/venvs/$2" version f first
  [[ -f "$src/pyvenv.cfg" ]] || return 0
  version="$(sed -n 's/^version = \([0-9]*\.[0-9]*\).*/\1/p' "$src/pyvenv.cfg")"
  mkdir -p "$dst/bin" "$dst/lib/python$version"
  printf 'home = %s\ninclude-system-site-packages = false\nversion = %s\n' "$BASE/python/bin" \
    "$(sed -n 's/^version = //p' "$src/pyvenv.cfg")" >"$dst/pyvenv.cfg"
  ln -sfn "$BASE/python/bin/python$version" "$dst/bin/python3"
  ln -sfn python3 "$dst/bin/python"
  ln -sfn "$(readlink -f "$src/lib/python$version/site-packages")" "$dst/lib/python$version/site-packages"
  for f in "$src"/bin/*; do
    [[ -f "$f" && ! -L "$f" ]] || continue
    first="$(head -c 200 "$f" | tr -d '\0' | head -n 1)"
    case "$first" in
      "#!$src/bin/python"* | "#!$(readlink -f "$src")/bin/python"*)
        { echo "#!$dst/bin/python3"; tail -n +2 "$f"; } >"$dst/bin/$(basename "$f")"
        chmod 755 "$dst/bin/$(basename "$f")" ;;
    esac
  done
  chmod -R go+rX "$dst"
}

# The tenants' jobs run the console's job program from this checkout (PYTHONPATH, CONSOLE_DIR): Python
# lists each directory on its path to find a module, so the checkout must be listable by them, not only
# passable (console/embedded.py makes a private one o+x for PostgreSQL; a clone in a 0700 folder).
# Its files are the project's own code, readable by all as git wrote them; only the folder is opened.
code_listable() {
  runuser -u nobody -- test -r "$ROOT/providers/slurm/job.py" -a -r "$ROOT" -a -x "$ROOT" 2>/dev/null && return 0
  if [[ "$(stat -c %u "$ROOT")" == "$(id -u)" ]]; then
    chmod o+rx "$ROOT"
    say "allowed others to list $ROOT (chmod o+rx) so the tenants' jobs can import the console's job program"
  fi
  runuser -u nobody -- test -r "$ROOT/providers/slurm/job.py" -a -r "$ROOT" 2>/dev/null ||
    say "warning: the tenants cannot read $ROOT (a folder above it is closed): their jobs will fail to start"
}

tenant_python() {
  code_listable
  local venv="$ROOT/.venv" home
  [[ -f "$venv/pyvenv.cfg" ]] || return 0
  home="$(sed -n 's/^home = //p' "$venv/pyvenv.cfg")"
  if runuser -u nobody -- test -x "$home/python3" 2>/dev/null; then
    return 0 # every user reaches the console's interpreter: nothing to do
  fi
  if [[ ! -x "$BASE/python/bin/python3" ]]; then
    say "copying the console's Python ($(dirname "$home")) to $BASE/python for the tenants' jobs"
    mkdir -p "$BASE" # a fresh checkout (CI's clone) has no var/slurm yet
    rm -rf "$BASE/python.tmp"
    cp -a "$(dirname "$home")" "$BASE/python.tmp"
    chmod -R go+rX "$BASE/python.tmp"
    # The interpreter finds libpython through a RUNPATH that names the original prefix: point it at
    # the copy's own lib (\$ORIGIN/../lib is shorter, so it is patched in place, padded with NULs).
    "$venv/bin/python3" - "$BASE/python.tmp/bin/python$(sed -n 's/^version = \([0-9]*\.[0-9]*\).*/\1/p' "$venv/pyvenv.cfg")" \
      "$(dirname "$home")/lib" <<'PY'
import sys
path, old = sys.argv[1], sys.argv[2].encode()
data = open(path, "rb").read()
new = b"$ORIGIN/../lib"
if old in data and len(new) <= len(old):
    open(path, "wb").write(data.replace(old + b"\0", new + b"\0" * (len(old) - len(new) + 1)))
PY
    mv "$BASE/python.tmp" "$BASE/python"
  fi
  venv_twin "$venv" console
  venv_twin "$ROOT/var/local-deps/jupyter" jupyter
}

# --- daemons -------------------------------------------------------------------------------------------

spawn() { # pidfile logfile command...: run in its own session with a clean environment, record its pid
  local pidfile="$1" logfile="$2"
  shift 2
  setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 SLURM_CONF="$CONF" "$@" \
    </dev/null >>"$logfile" 2>&1 &
  echo $! >"$pidfile"
}

start_munge() {
  pid_alive "$RUN/munged.pid" && [[ -S "$MUNGE/munge.socket" ]] && return 0
  id munge >/dev/null 2>&1 || die "the munge user is missing (is the munge package installed?)"
  if [[ ! -s "$MUNGE/munge.key" ]]; then
    (umask 077 && dd if=/dev/urandom bs=1024 count=1 status=none >"$MUNGE/munge.key")
  fi
  chown munge:munge "$MUNGE" "$MUNGE/munge.key"
  chmod 700 "$MUNGE"
  chmod 600 "$MUNGE/munge.key"
  # munged insists that its socket's directory is not writable by others; ours is 0711 so clients
  # (slurmrestd as nobody) can reach the socket.
  chmod 711 "$MUNGE"
  rm -f "$MUNGE/munge.socket" "$MUNGE/munge.socket.lock"
  setsid runuser -u munge -- munged -F --force --socket="$MUNGE/munge.socket" --key-file="$MUNGE/munge.key" \
    --pid-file="$MUNGE/munged.pid" --log-file="$MUNGE/munged.log" --seed-file="$MUNGE/munged.seed" \
    </dev/null >>"$LOG/munged.out" 2>&1 &
  echo $! >"$RUN/munged.pid"
  for _ in $(seq 50); do [[ -S "$MUNGE/munge.socket" ]] && return 0; sleep 0.1; done
  die "munged did not start (see $MUNGE/munged.log)"
}

start_ctld() {
  pid_alive "$RUN/slurmctld.run" && return 0
  spawn "$RUN/slurmctld.run" "$LOG/slurmctld.out" slurmctld -D -f "$CONF"
  for _ in $(seq 100); do
    SLURM_CONF="$CONF" scontrol ping 2>/dev/null | grep -q "is UP" && return 0
    pid_alive "$RUN/slurmctld.run" || break
    sleep 0.1
  done
  tail -n 20 "$LOG/slurmctld.log" >&2 || true
  die "slurmctld did not start"
}

start_node() { # name
  pid_alive "$RUN/slurmd-$1.run" && return 0
  mkdir -p "$BASE/spool/$1"
  spawn "$RUN/slurmd-$1.run" "$LOG/slurmd-$1.out" slurmd -D -N "$1" -f "$CONF"
}

stop_node() { # name
  if pid_alive "$RUN/slurmd-$1.run"; then
    kill "$(cat "$RUN/slurmd-$1.run")" 2>/dev/null || true
    for _ in $(seq 50); do pid_alive "$RUN/slurmd-$1.run" || break; sleep 0.1; done
  fi
  rm -f "$RUN/slurmd-$1.run"
}

rest_conf() {
  # The configuration slurmrestd (as nobody) can read.
  if runuser -u nobody -- test -r "$CONF" 2>/dev/null; then
    echo "$CONF"
  else
    mkdir -p "$REST_ETC"
    chmod 755 "$REST_ETC"
    cp "$CONF" "$REST_ETC/slurm.conf"
    cp "$ETC/gres.conf" "$REST_ETC/gres.conf"
    chmod 644 "$REST_ETC/slurm.conf" "$REST_ETC/gres.conf"
    echo "$REST_ETC/slurm.conf"
  fi
}

start_rest() {
  pid_alive "$RUN/slurmrestd.run" && port_listens "$REST_PORT" && return 0
  port_listens "$REST_PORT" && die "port $REST_PORT is taken by another program (set SLURM_LOCAL_REST_PORT)"
  local conf
  conf="$(rest_conf)"
  setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 SLURM_CONF="$conf" SLURM_JWT=daemon \
    runuser -u nobody -- slurmrestd -f "$conf" -a rest_auth/jwt -s openapi/v0.0.38 "127.0.0.1:$REST_PORT" \
    </dev/null >>"$LOG/slurmrestd.log" 2>&1 &
  echo $! >"$RUN/slurmrestd.run"
  for _ in $(seq 50); do port_listens "$REST_PORT" && return 0; sleep 0.1; done
  tail -n 20 "$LOG/slurmrestd.log" >&2 || true
  die "slurmrestd did not start"
}

stop_pidfile() { # pidfile
  if pid_alive "$1"; then
    local pid
    pid="$(cat "$1")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

nodes_idle() {
  # Every node has registered and answers (no UNKNOWN, DOWN, INVAL, or "*" not responding).
  local states s
  states="$(SLURM_CONF="$CONF" sinfo -h -N -o '%t' 2>/dev/null)" || return 1
  [[ -n "$states" ]] || return 1
  while read -r s; do
    case "$s" in idle | mix | alloc | comp | resv | plnd) ;; *) return 1 ;; esac
  done <<<"$states"
}

all_up() {
  pid_alive "$RUN/munged.pid" || return 1
  pid_alive "$RUN/slurmctld.run" || return 1
  local n
  for n in $(node_names); do pid_alive "$RUN/slurmd-$n.run" || return 1; done
  pid_alive "$RUN/slurmrestd.run" && port_listens "$REST_PORT"
}

cmd_start() {
  install_packages
  tenant_python
  local changed
  changed="$(write_config)"
  if [[ -n "$changed" ]] && pid_alive "$RUN/slurmctld.run"; then
    say "configuration changed: restarting the daemons"
    cmd_stop >/dev/null
  fi
  if all_up; then
    say "running ($NODES nodes, REST on 127.0.0.1:$REST_PORT)"
    return 0
  fi
  start_munge
  start_ctld
  local n
  for n in $(node_names); do start_node "$n"; done
  start_rest
  for _ in $(seq 100); do nodes_idle && break; sleep 0.1; done
  nodes_idle || { SLURM_CONF="$CONF" sinfo -N >&2 || true; die "the nodes did not register"; }
  say "running ($NODES nodes gpu01..$(last_node), $GPUS x gpu:$GPU_TYPE each; REST on 127.0.0.1:$REST_PORT)"
  say "client environment: $(client_env)"
}

# The processes of the cluster's jobs: every process in a job's cgroup (proctrack/cgroup puts each
# job's whole tree, daemonized children too, under slurm_<node>/uid_<uid>/job_<id>).
job_pids() {
  local f
  for f in /sys/fs/cgroup/freezer/slurm_*/uid_*/job_*/cgroup.procs /sys/fs/cgroup/freezer/slurm/uid_*/job_*/cgroup.procs \
    /sys/fs/cgroup/freezer/slurm_*/uid_*/job_*/*/cgroup.procs /sys/fs/cgroup/freezer/slurm/uid_*/job_*/*/cgroup.procs; do
    [[ -r "$f" ]] && cat "$f"
  done 2>/dev/null | sort -un || true
}

# The tenants' users (gpuc-t<N>, made by the console's Slurm backend): whatever still runs as them,
# or as a uid of their subordinate ranges (/etc/subuid: their rootless containers' root and other
# users), once the daemons are gone is a straggler of a job (one that escaped while its node's slurmd
# was dead, say), killed by process id as a last resort.
tenant_pids() {
  local uids
  uids="$(getent passwd || true) "
  uids="$(printf '%s\n' "$uids" | awk -F: -v p="$TENANT_PREFIX" 'index($1, p) == 1 && $1 ~ /[0-9]$/ { print $3 }' | paste -sd, -)"
  [[ -n "$uids" ]] || return 0
  ps -o pid= -u "$uids" 2>/dev/null | tr -d ' ' || true # ps says 1 when none is left
  [[ -r /etc/subuid ]] || return 0
  ps -eo pid=,uid= 2>/dev/null | awk -v p="$TENANT_PREFIX" '
    FNR == NR { split($0, f, ":"); if (index(f[1], p) == 1 && f[1] ~ /[0-9]$/) { low[++n] = f[2]; high[n] = f[2] + f[3] }; next }
    { for (i = 1; i <= n; i++) if ($2 >= low[i] && $2 < high[i]) { print $1; break } }' /etc/subuid - || true
}

cancel_jobs() {
  # Every job of the cluster is cancelled (they would not survive the stop anyway: a requeueable one
  # would run again by itself at the next start, with nobody's console waiting for it), then the stop
  # waits until Slurm has ended them and their processes are gone, so no instance outlives its cluster.
  pid_alive "$RUN/slurmctld.run" || return 0
  local ids
  ids="$(SLURM_CONF="$CONF" squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true)"
  [[ -n "${ids// /}" ]] || return 0
  say "cancelling jobs: $ids"
  # shellcheck disable=SC2086
  SLURM_CONF="$CONF" scancel $ids 2>/dev/null || true
  for _ in $(seq 300); do
    [[ -z "$(SLURM_CONF="$CONF" squeue -h -t R,CG,CF,S -o %A 2>/dev/null)" && -z "$(job_pids)" ]] && return 0
    sleep 0.1
  done
  say "jobs still ending after 30 s: $(SLURM_CONF="$CONF" squeue -h -o '%A %T' | paste -sd' ' -)"
}

kill_stragglers() {
  local pids
  pids="$( (job_pids; tenant_pids) | sort -un | tr '\n' ' ')"
  [[ -n "${pids// /}" ]] || return 0
  say "killing processes the jobs left behind: $pids"
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null || true
  for _ in $(seq 50); do [[ -z "$( (job_pids; tenant_pids) | tr -d '[:space:]')" ]] && return 0; sleep 0.1; done
  say "still running: $( (job_pids; tenant_pids) | paste -sd' ' -)"
}

# The cluster's own daemons found by what their command lines name (its config, the REST copy of it,
# its munge socket), whatever the pid files say: a pid file holds the wrapper a daemon was started
# under (runuser, setsid), and a run that restarted the cluster part-way may have left one that names
# a process long gone while the daemon it started still runs. Never this script or its parent.
daemon_pids() {
  { pgrep -f -- "-f $CONF" || true; pgrep -f -- "$REST_ETC/slurm.conf" || true; pgrep -f -- "--socket=$MUNGE/munge.socket" || true; } |
    grep -vx -e "$$" -e "$PPID" | sort -un || true
}

kill_daemons() {
  local pids
  pids="$(daemon_pids | tr '\n' ' ')"
  [[ -n "${pids// /}" ]] || return 0
  say "stopping daemons the pid files did not name: $pids"
  # shellcheck disable=SC2086
  kill $pids 2>/dev/null || true
  for _ in $(seq 50); do [[ -z "$(daemon_pids)" ]] && return 0; sleep 0.1; done
  # shellcheck disable=SC2086
  kill -9 $(daemon_pids) 2>/dev/null || true
  for _ in $(seq 20); do [[ -z "$(daemon_pids)" ]] && return 0; sleep 0.1; done
  say "still running: $(daemon_pids | paste -sd' ' -)"
  return 1
}

cmd_stop() {
  cancel_jobs
  stop_pidfile "$RUN/slurmrestd.run"
  local n
  for n in $(node_names); do stop_node "$n"; done
  stop_pidfile "$RUN/slurmctld.run"
  stop_pidfile "$RUN/munged.pid"
  kill_stragglers
  kill_daemons || die "the cluster did not stop"
  say "stopped"
}

cmd_status() {
  local ok=0 n
  pid_alive "$RUN/munged.pid" && say "munged: running" || { say "munged: stopped"; ok=1; }
  pid_alive "$RUN/slurmctld.run" && say "slurmctld: running" || { say "slurmctld: stopped"; ok=1; }
  for n in $(node_names); do
    pid_alive "$RUN/slurmd-$n.run" && say "slurmd $n: running" || { say "slurmd $n: stopped"; ok=1; }
  done
  if pid_alive "$RUN/slurmrestd.run" && port_listens "$REST_PORT"; then
    say "slurmrestd: running on 127.0.0.1:$REST_PORT"
  else
    say "slurmrestd: stopped"
    ok=1
  fi
  [[ $ok -eq 0 ]] && SLURM_CONF="$CONF" sinfo -N -o '%N %t %G' 2>/dev/null || true
  return $ok
}

case "${1:-start}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) client_env ;;
  node-stop) [[ -n "${2:-}" ]] || die "which node?"; stop_node "$2" ;;
  node-start) [[ -n "${2:-}" ]] || die "which node?"; start_node "$2" ;;
  *) die "usage: $0 [start|stop|status|env|node-stop NODE|node-start NODE]" ;;
esac
