#!/bin/bash
# refenv release.sh — a newer neutron-server (RELEASE=2025.1 or 2026.2) from Debian packages in a
# debootstrap chroot, against the host's MariaDB and RabbitMQ. Sourced by setup.sh (release_setup);
# run directly:
#   RELEASE=2026.2 refenv/release.sh env     prints REFENV_* shell assignments (API port, vhost,
#                                            transport_url, database, chroot, version)
#   RELEASE=2026.2 refenv/release.sh stop    stops that release's daemons (by pid file)
#   RELEASE=2026.2 refenv/release.sh status  pid files, API answer, version
# Idempotent: the chroot is made once (/var/lib/ovsagent-refenv/<release>, ~5 min, ~900 MB) and
# marked ready; a later run with the server answering on its port changes nothing.
# Daemons are started with setsid, their pids recorded in /run/refenv/<release>/; never by name.

release_vars() {
  case "$RELEASE" in
    2025.1) SUITE=trixie; REFENV_API_PORT=9251 ;;
    2026.2) SUITE=sid; REFENV_API_PORT=9262 ;;
    *) echo "release.sh: RELEASE=$RELEASE is not a chroot release (2025.1, 2026.2)" >&2; return 2 ;;
  esac
  REFENV_CHROOT=/var/lib/ovsagent-refenv/$RELEASE
  REFENV_DB=neutron_${RELEASE//./_}
  REFENV_VHOST=neutron-$RELEASE
  REFENV_TRANSPORT_URL="rabbit://guest:guest@127.0.0.1:5672/$REFENV_VHOST"
  RRUN=/run/refenv/$RELEASE
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
  # what debootstrap puts in (uwsgi for 2026.2's API; the agent for AGENT=python later)
  INCLUDE=python3-neutron,neutron-common,python3-pymysql,neutron-openvswitch-agent,iproute2,procps,uwsgi-core,uwsgi-plugin-python3
}

rlog() { echo "[release $RELEASE $(date +%T)] $*"; }
ralive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
rapi_code() { curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0/networks" || true; }
release_version() { chroot "$REFENV_CHROOT" dpkg-query -W -f '${Version}' python3-neutron 2>/dev/null || echo unknown; }

# chroot_mounts: /proc (neutron reads it), /dev and /sys bound from the host, once.
chroot_mounts() {
  local d=$1
  mountpoint -q "$d/proc" || mount -t proc proc "$d/proc"
  mountpoint -q "$d/dev" || mount --bind /dev "$d/dev"
  mountpoint -q "$d/sys" || mount --bind /sys "$d/sys"
}
chroot_umounts() {
  local d=$1 m
  for m in sys dev proc; do mountpoint -q "$d/$m" && umount "$d/$m"; done
  return 0
}

# make_chroot: debootstrap (marker .refenv-debootstrapped), then finish what --include left
# unconfigured with one `apt-get -f install` (marker .refenv-ready).
make_chroot() {
  local tmp=$REFENV_CHROOT.tmp
  [ -e "$REFENV_CHROOT/.refenv-ready" ] && return 0
  mkdir -p "$(dirname "$REFENV_CHROOT")"
  if [ ! -e "$tmp/.refenv-debootstrapped" ]; then
    # --include leaves packages with virtual dependencies unconfigured (python3-grpcio in sid,
    # python3-pycparser in trixie): debootstrap then fails while configuring, with the base system
    # in place; apt-get -f install below finishes them (also after such a run was interrupted
    # here before the marker was written). Any other failure stops here.
    partial_ok() { grep -q "Failure while configuring" "$tmp.debootstrap.log" 2>/dev/null \
      && [ -x "$tmp/usr/bin/apt-get" ] && [ -s "$tmp/etc/apt/sources.list" ]; }
    if partial_ok; then
      rlog "a previous debootstrap left packages unconfigured: apt-get -f install finishes them"
    elif rlog "debootstrap $SUITE into $tmp (about 5 minutes; log $tmp.debootstrap.log)"; ! debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$tmp" "$MIRROR" > "$tmp.debootstrap.log" 2>&1; then
      if partial_ok; then
        rlog "debootstrap left packages unconfigured ($(grep -o 'possibly the package [^ ]*' "$tmp.debootstrap.log" | tail -1)): apt-get -f install finishes them"
      else
        tail -20 "$tmp.debootstrap.log"; rlog "debootstrap failed (log $tmp.debootstrap.log)"; return 1
      fi
    fi
    touch "$tmp/.refenv-debootstrapped"
  fi
  # no service starts from maintainer scripts inside the chroot
  printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"; chmod +x "$tmp/usr/sbin/policy-rc.d"
  # the mirror this machine reaches can serve a Release file past its Valid-Until (seen for sid:
  # "is expired (invalid since 28d)"): apt would refuse it; the packages are still signed
  echo 'Acquire::Check-Valid-Until "false";' > "$tmp/etc/apt/apt.conf.d/99refenv"
  chroot_mounts "$tmp"
  rlog "apt-get -f install inside the chroot"
  if ! chroot "$tmp" env DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -q && apt-get -f install -y -q' > "$tmp.apt.log" 2>&1; then
    tail -20 "$tmp.apt.log"; chroot_umounts "$tmp"; rlog "apt-get -f install failed (log $tmp.apt.log)"; return 1
  fi
  chroot_umounts "$tmp"
  touch "$tmp/.refenv-ready"
  mv "$tmp" "$REFENV_CHROOT"
  rlog "chroot ready: $REFENV_CHROOT (neutron $(release_version))"
}

# write_conf: refenv's Zed configuration with this release's port, database and vhost.
write_conf() {
  local d=$REFENV_CHROOT/etc/neutron/refenv
  mkdir -p "$d" "$REFENV_CHROOT/var/lib/neutron/lock" "$REFENV_CHROOT/var/log/neutron"
  install -m 644 "$HERE"/etc/neutron/ml2_conf.ini "$d/"
  # noauth's admin context has no roles; the binding API wants the service role (policy-chroot.yaml)
  install -m 644 "$HERE"/etc/neutron/policy-chroot.yaml "$d/policy-none.yaml"
  sed -e "s|^bind_port = .*|bind_port = $REFENV_API_PORT|" \
      -e "s|^transport_url = .*|transport_url = $REFENV_TRANSPORT_URL|" \
      -e "s|^connection = .*|connection = mysql+pymysql://neutron:neutronpass@127.0.0.1/$REFENV_DB|" \
      "$HERE/etc/neutron/neutron.conf" > "$d/neutron.conf"
  # 2025.1's eventlet API worker, idle, misses the broker's heartbeats: the broker drops it and
  # the next publish waits ~60 s (docs/reference/releases.md).
  cat >> "$d/neutron.conf" <<EOF

# written by refenv/release.sh for $RELEASE
[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 0
EOF
  # 2026.2: the API runs under uwsgi (no neutron-server binary any more)
  cat > "$d/api-uwsgi.ini" <<EOF
[uwsgi]
plugins = python3
http-socket = 127.0.0.1:$REFENV_API_PORT
wsgi-file = /usr/lib/python3/dist-packages/neutron/wsgi/api.py
env = OS_NEUTRON_CONFIG_DIR=/etc/neutron/refenv
env = OS_NEUTRON_CONFIG_FILES=neutron.conf;ml2_conf.ini
master = true
processes = 1
threads = 1
lazy-apps = true
enable-threads = true
die-on-term = true
exit-on-reload = false
add-header = Connection: close
buffer-size = 65535
start-time = %t
EOF
}

# rstart NAME CMD...: setsid, in the chroot, pid recorded. The subshell execs setsid, which (not a
# group leader: no job control here) execs nohup, chroot, the daemon: $! is the daemon's pid.
rstart() {
  local name=$1; shift
  ralive "$RRUN/$name.pid" && return 0
  (cd / && exec setsid nohup chroot "$REFENV_CHROOT" "$@") \
      > "$REFENV_CHROOT/var/log/neutron/refenv-$name.stdout" 2>&1 < /dev/null &
  echo $! > "$RRUN/$name.pid"
  sleep 1
  rlog "$name pid $(cat "$RRUN/$name.pid"): $(tr '\0' ' ' < "/proc/$(cat "$RRUN/$name.pid")/cmdline" 2>/dev/null | cut -c1-80)"
}

release_start() {
  local NC="--config-file /etc/neutron/refenv/neutron.conf --config-file /etc/neutron/refenv/ml2_conf.ini"
  if [ "$RELEASE" = 2025.1 ]; then
    rstart server /usr/bin/neutron-server $NC --log-file /var/log/neutron/refenv-server.log
  else
    rstart rpc-server /usr/bin/neutron-rpc-server $NC --log-file /var/log/neutron/refenv-rpc-server.log
    rstart periodic-workers /usr/bin/neutron-periodic-workers $NC --log-file /var/log/neutron/refenv-periodic-workers.log
    rstart api /usr/bin/uwsgi --ini /etc/neutron/refenv/api-uwsgi.ini --logto /var/log/neutron/refenv-api.log
  fi
}

release_running() {
  local n
  for n in server rpc-server periodic-workers api; do ralive "$RRUN/$n.pid" && return 0; done
  return 1
}

release_setup() {
  release_vars
  mkdir -p "$RRUN"
  if [ "$(rapi_code)" = 200 ]; then
    rlog "neutron $RELEASE answers on 127.0.0.1:$REFENV_API_PORT: left as it is"
    return 0
  fi
  if release_running; then
    rlog "neutron $RELEASE daemons run (pids in $RRUN) but the API does not answer yet: waiting, not restarting"
  else
    make_chroot
    chroot_mounts "$REFENV_CHROOT"
    mysql -e "CREATE DATABASE IF NOT EXISTS $REFENV_DB;
      CREATE USER IF NOT EXISTS 'neutron'@'localhost' IDENTIFIED BY 'neutronpass';
      CREATE USER IF NOT EXISTS 'neutron'@'127.0.0.1' IDENTIFIED BY 'neutronpass';
      GRANT ALL ON $REFENV_DB.* TO 'neutron'@'localhost'; GRANT ALL ON $REFENV_DB.* TO 'neutron'@'127.0.0.1'; FLUSH PRIVILEGES;"
    $RMQ -q add_vhost "$REFENV_VHOST" >/dev/null 2>&1 || true   # exists already: fine
    $RMQ -q set_permissions -p "$REFENV_VHOST" guest '.*' '.*' '.*' >/dev/null
    write_conf
    rlog "neutron-db-manage upgrade heads ($REFENV_DB)"
    chroot "$REFENV_CHROOT" neutron-db-manage --config-file /etc/neutron/refenv/neutron.conf \
      --config-file /etc/neutron/refenv/ml2_conf.ini upgrade heads > "$REFENV_CHROOT/var/log/neutron/refenv-db-manage.log" 2>&1 \
      || { tail -20 "$REFENV_CHROOT/var/log/neutron/refenv-db-manage.log"; rlog "db-manage failed"; return 1; }
    release_start
  fi
  local i
  for i in $(seq 1 120); do [ "$(rapi_code)" = 200 ] && break; sleep 1; done
  [ "$(rapi_code)" = 200 ] || { rlog "API does not answer on 127.0.0.1:$REFENV_API_PORT (logs: $REFENV_CHROOT/var/log/neutron/)"; return 1; }
  rlog "neutron $(release_version) answers on http://127.0.0.1:$REFENV_API_PORT/v2.0 (vhost $REFENV_VHOST, database $REFENV_DB)"
}

release_stop() {
  release_vars
  local n p
  for n in api periodic-workers rpc-server server; do
    [ -s "$RRUN/$n.pid" ] || continue
    p=$(cat "$RRUN/$n.pid")
    # only if that pid still runs one of ours (a recycled pid is never hit)
    if kill -0 "$p" 2>/dev/null && tr '\0' ' ' < "/proc/$p/cmdline" | grep -q -- '/etc/neutron/refenv/'; then
      rlog "stopping $n pid $p"; kill -TERM "$p"
      for _ in $(seq 1 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
      kill -0 "$p" 2>/dev/null && { rlog "$n still alive, SIGKILL"; kill -KILL "$p"; }
    fi
    rm -f "$RRUN/$n.pid"
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
  HERE=$(cd "$(dirname "$0")" && pwd)
  RELEASE=${RELEASE:-2026.2}
  case "${1:-env}" in
    env) release_vars
         printf 'REFENV_RELEASE=%q\nREFENV_API_PORT=%q\nREFENV_VHOST=%q\nREFENV_TRANSPORT_URL=%q\nREFENV_DB=%q\nREFENV_CHROOT=%q\nREFENV_VERSION=%q\n' \
           "$RELEASE" "$REFENV_API_PORT" "$REFENV_VHOST" "$REFENV_TRANSPORT_URL" "$REFENV_DB" "$REFENV_CHROOT" "$(release_version)" ;;
    stop) release_stop ;;
    status) release_vars
            for n in server rpc-server periodic-workers api; do [ -s "$RRUN/$n.pid" ] && echo "$n pid $(cat "$RRUN/$n.pid") $(ralive "$RRUN/$n.pid" && echo alive || echo dead)"; done
            echo "API 127.0.0.1:$REFENV_API_PORT: $(rapi_code); neutron $(release_version)" ;;
    *) echo "usage: RELEASE=2025.1|2026.2 $0 env|stop|status" >&2; exit 2 ;;
  esac
fi
