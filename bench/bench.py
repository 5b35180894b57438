#!/usr/bin/python3
"""ovsagent benchmark driver (run it through bench/run.sh).

One agent at a time (ours or the reference Python agent) runs as host "hvbench" inside the
network namespace "benchhv" on a PRIVATE Open vSwitch (ovsdb-server + ovs-vswitchd in that
netns, OVS_RUNDIR=/tmp/ovsbench/ovs, datapath netdev) against the real neutron-server on the
host, through an AMQP relay (127.0.0.1:5672 inside the netns -> host RabbitMQ). Both agents get
the same two configuration files. Every process we start is recorded by pid in /tmp/ovsbench/pids
and is only ever signalled after checking /proc/PID/cmdline; nothing is killed by name.

Measured per agent (see bench/README.md): server floor (floor.py, once per run), single port
plug -> ACTIVE p50/p99, N ports back to back -> all ACTIVE, unplug -> all DOWN, RSS and idle CPU
of every agent process in the netns at the largest N, agent restart with a 100 ms ping between
two VMs, ovs-vswitchd restart recovery, flows per bridge.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

API = "http://127.0.0.1:9696/v2.0"
PROJ = "bench"                # own project: its own port quota (default 500) and default SG
NS = "benchhv"
HOST = "hvbench"
BASE = "/tmp/ovsbench"
OVSD = BASE + "/ovs"          # OVS_RUNDIR of the private OVS (db.sock, <br>.mgmt, *.ctl)
PIDS = BASE + "/pids"
ETC = BASE + "/etc"
LOCAL_IP = "172.30.99.1"      # on a veth device inside the netns
NET_NAME = "bench-vx"
SUBNET_CIDR = "10.77.0.0/20"
PORT_PREFIX = "bench-"
VMS = ("bvm1", "bvm2")        # netns of the two pinging VMs
REFENV = os.environ.get("OVSAGENT_REFENV") or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "refenv")
FLOOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor.py")  # refenv's, chunked for N = 1,000
PULLFLOOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pullfloor.py")  # the restart's floor
REF_CONF = "/etc/neutron/refenv/neutron.conf"
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
ENV = dict(os.environ, PATH="/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin")
OVS_ENV = dict(ENV, OVS_RUNDIR=OVSD, OVS_LOGDIR=OVSD, OVS_DBDIR=OVSD)
CLK_TCK = os.sysconf("SC_CLK_TCK")

OUT = None  # results dir, set in main
T_START = time.time()


class BenchError(Exception):
    pass


# ------------------------------------------------------------------ logging / output
def log(msg):
    line = "[bench %s +%6.1fs] %s" % (time.strftime("%H:%M:%S"), time.time() - T_START, msg)
    print(line, flush=True)
    if OUT:
        with open(os.path.join(OUT, "bench.log"), "a") as f:
            f.write(line + "\n")


def save(name, text):
    with open(os.path.join(OUT, name), "a") as f:
        f.write(text if text.endswith("\n") else text + "\n")


# ------------------------------------------------------------------ processes
def sh(cmd, check=True, env=ENV, timeout=120, input=None):
    """Run a command (list or shell string), return stdout."""
    shell = isinstance(cmd, str)
    r = subprocess.run(cmd, shell=shell, env=env, capture_output=True, text=True, timeout=timeout,
                       input=input)
    if check and r.returncode != 0:
        raise BenchError("command failed (%d): %s\n%s" % (r.returncode, cmd, r.stderr.strip()[-2000:]))
    return r.stdout


def nsx(ns, *args, **kw):
    return sh(["ip", "netns", "exec", ns] + list(args), **kw)


def vsctl(*args, **kw):
    return sh(["ovs-vsctl", "--db=unix:%s/db.sock" % OVSD, "--timeout=60"] + list(args), **kw)


def private_ovs_ok():
    """The socket we talk to is our ovsdb-server (not a system one listening on our path)."""
    out = vsctl("--no-wait", "get", "open_vswitch", ".", "external_ids:system-id", check=False, timeout=10)
    return out.strip().strip('"') == "bench-" + HOST


def system_guard(taps=()):
    """Undo anything of ours that reached the SYSTEM OVS (a Manager on our socket path, our taps).
    Returns a description of what was found (empty: clean)."""
    found = []
    sysdb = ["ovs-vsctl", "--db=unix:/var/run/openvswitch/db.sock", "--timeout=10"]
    out = sh(sysdb + ["--format=json", "--columns=_uuid,target", "list", "Manager"], check=False)
    try:
        rows = json.loads(out)["data"] if out.strip() else []
    except ValueError:
        rows = []
    for uuid, target in rows:
        if BASE in str(target):
            sh(sysdb + ["remove", "open_vswitch", ".", "manager_options", uuid[1]], check=False)
            found.append("system Manager %s removed" % target)
    if taps:
        sysports = set(sh(sysdb + ["list-ports", "br-int"], check=False).split())
        for t in taps:
            if t in sysports:
                sh(sysdb + ["--if-exists", "del-port", "br-int", t], check=False)
                found.append("our %s removed from system br-int" % t)
    for f in found:
        log("SYSTEM OVS GUARD: " + f)
    return found


def ofctl_count(br):
    out = sh(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "unix:%s/%s.mgmt" % (OVSD, br)],
             check=False, timeout=60)
    return sum(1 for l in out.splitlines() if "cookie=" in l)


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for l in f:
                if l.startswith("State:"):
                    return "Z" not in l.split()[1]
    except OSError:
        return False
    return False


def record(name, pid):
    with open(os.path.join(PIDS, name + ".pid"), "w") as f:
        f.write("%d\n" % pid)


def recorded(name, must_contain):
    """pid from our pidfile if alive and its cmdline still contains must_contain."""
    try:
        pid = int(open(os.path.join(PIDS, name + ".pid")).read().strip())
    except (OSError, ValueError):
        return None
    if is_ours(pid, must_contain):
        return pid
    return None


def is_ours(pid, must_contain):
    """alive and cmdline contains must_contain; re-read a few times because a process that
    rewrites its title (setproctitle) can briefly show an empty or partial cmdline."""
    for _ in range(5):
        if not alive(pid):
            return False
        if must_contain in cmdline(pid):
            return True
        time.sleep(0.05)
    return False


def stop_pid(pid, must_contain, label, term_wait=20.0):
    """SIGTERM, then SIGKILL after term_wait; only if the cmdline still matches."""
    if not pid or not is_ours(pid, must_contain):
        return None
    t0 = time.time()
    os.kill(pid, signal.SIGTERM)
    while alive(pid) and time.time() - t0 < term_wait:
        time.sleep(0.05)
    how = "TERM"
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        how = "TERM+KILL after %.0fs" % term_wait
        while alive(pid) and time.time() - t0 < term_wait + 10:
            time.sleep(0.05)
    log("stopped %s pid %d (%s, %.2fs)" % (label, pid, how, time.time() - t0))
    return time.time() - t0


def spawn(name, args, logfile, env=ENV, cwd=BASE):
    """Start a daemon in its own session, inside whatever argv says (ip netns exec ...)."""
    lf = open(logfile, "ab")
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                         env=env, cwd=cwd, start_new_session=True)
    lf.close()
    record(name, p.pid)
    return p


def netns_inode(ns):
    return os.stat("/run/netns/" + ns).st_ino


def procs_in_ns(ns):
    """pids of every process whose network namespace is ns."""
    ino = netns_inode(ns)
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.stat("/proc/%s/ns/net" % d).st_ino == ino and alive(int(d)):
                out.append(int(d))
        except OSError:
            pass
    return out


def agent_pids():
    """The agent under test and all its helpers: every process in the bench netns that is not
    OVS, the AMQP relay or one of our own tools."""
    skip = ("ovsdb-server", "ovs-vswitchd", "socat", "ping", "ip netns", "curl", "ovs-ofctl",
            "ovs-vsctl", "ovs-appctl")
    pids = []
    for p in procs_in_ns(NS):
        c = cmdline(p)
        if not c or any(c.startswith(s) or ("/" + s) in c.split(" ")[0] for s in skip):
            continue
        pids.append(p)
    return pids


def rss_kib(pid):
    try:
        for l in open("/proc/%d/status" % pid):
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0


def rss_split(pid):
    """RssAnon / RssFile / RssShmem in KiB: which part of RSS is the process's own
    memory and which the binary's pages (file-backed, shared with every copy)."""
    out = {}
    try:
        for l in open("/proc/%d/status" % pid):
            for k in ("RssAnon:", "RssFile:", "RssShmem:"):
                if l.startswith(k):
                    out[k[:-1]] = int(l.split()[1])
    except OSError:
        pass
    return "anon %d / file %d / shmem %d KiB" % (out.get("RssAnon", 0), out.get("RssFile", 0), out.get("RssShmem", 0))


def cpu_ticks(pid):
    try:
        f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except (OSError, IndexError):
        return 0


# ------------------------------------------------------------------ neutron REST
def api(method, path, body=None, timeout=900):
    req = urllib.request.Request(API + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json", "X-Project-Id": PROJ})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data = r.read()
            return json.loads(data) if data else None
    except urllib.error.HTTPError as e:
        raise BenchError("%s %s: HTTP %d %s" % (method, path, e.code, e.read()[:500]))


def api_up():
    try:
        api("GET", "/networks?limit=1", timeout=10)
        return True
    except Exception:
        return False


def ensure_network():
    nets = api("GET", "/networks?name=%s" % NET_NAME)["networks"]
    if nets:
        net = nets[0]
    else:
        net = api("POST", "/networks", {"network": {"name": NET_NAME, "project_id": PROJ}})["network"]
    subs = api("GET", "/subnets?network_id=%s" % net["id"])["subnets"]
    if not subs:
        api("POST", "/subnets", {"subnet": {"name": NET_NAME, "project_id": PROJ, "network_id": net["id"],
                                            "ip_version": 4, "cidr": SUBNET_CIDR, "gateway_ip": None}})
    return net["id"]


def our_ports(net):
    ps = api("GET", "/ports?network_id=%s&fields=id&fields=name&fields=status" % net)["ports"]
    return [p for p in ps if p["name"].startswith(PORT_PREFIX)]


def create_ports(net, names, workers=3, chunk=50):
    """Bulk POSTs of `chunk` ports, `workers` at a time; returns dicts id, name, mac, ip, device_id."""
    chunks = [names[i:i + chunk] for i in range(0, len(names), chunk)]
    res, errs, lock = {}, [], threading.Lock()

    def w():
        while True:
            with lock:
                if not chunks or errs:
                    return
                c = chunks.pop(0)
            body = {"ports": [{"name": n, "project_id": PROJ, "network_id": net, "binding:host_id": HOST,
                               "device_owner": "compute:nova", "device_id": _uuid()} for n in c]}
            t0 = time.time()
            try:
                ps = api("POST", "/ports", body)["ports"]
            except Exception as e:
                with lock:
                    errs.append(e)
                return
            with lock:
                for p in ps:
                    res[p["name"]] = {"id": p["id"], "name": p["name"], "mac": p["mac_address"],
                                      "ip": p["fixed_ips"][0]["ip_address"], "device_id": p["device_id"],
                                      "vif_type": p.get("binding:vif_type")}
            log("created %d ports (%.1fs)" % (len(c), time.time() - t0))
    ts = [threading.Thread(target=w) for _ in range(workers)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    if errs:
        raise BenchError("port create: %s" % errs[0])
    return [res[n] for n in names]


def _uuid():
    import uuid
    return str(uuid.uuid4())


def delete_ports(ids, workers=4):
    ids = list(ids)
    lock = threading.Lock()

    def w():
        while True:
            with lock:
                if not ids:
                    return
                pid = ids.pop()
            try:
                api("DELETE", "/ports/" + pid, timeout=120)
            except Exception as e:  # already gone is fine
                if "404" not in str(e):
                    log("delete port %s: %s" % (pid, e))
    ts = [threading.Thread(target=w) for _ in range(workers)]
    [t.start() for t in ts]
    [t.join() for t in ts]


def statuses(net):
    """id -> status for every port on net (one GET)."""
    ps = api("GET", "/ports?network_id=%s&fields=id&fields=status" % net, timeout=120)["ports"]
    return {p["id"]: p["status"] for p in ps}


def poll_pause(took):
    """The pause after a status GET that took `took` seconds: twice that, at least 0.1 s.
    The GET costs the server's API worker as much as it takes (1.5 s for 1,000 ports here),
    on the same 2 cores as its RPC worker: polled back to back it would slow the very thing
    measured. floor.py polls the same way."""
    return max(0.1, 2 * took)


def wait_status(net, ids, want, timeout, series_name=None, t0=None):
    """Poll until every id has status want (ACTIVE) or none has ACTIVE (want=DOWN).
    Returns seconds since t0 or None on timeout."""
    ids = set(ids)
    t0 = t0 or time.time()
    series = []
    while True:
        g0 = time.time()
        st = statuses(net)
        took = time.time() - g0
        now = time.time() - t0
        if want == "ACTIVE":
            n = sum(1 for i in ids if st.get(i) == "ACTIVE")
            done = n == len(ids)
        else:
            n = sum(1 for i in ids if st.get(i) == "ACTIVE")
            done = n == 0
        series.append("%.2f %d" % (now, n))
        if done:
            break
        if now > timeout:
            if series_name:
                save(series_name, "\n".join(series))
            return None
        time.sleep(poll_pause(took))
    if series_name:
        save(series_name, "\n".join(series))
    return time.time() - t0


# ------------------------------------------------------------------ environment
def env_check():
    if os.geteuid() != 0:
        raise BenchError("run as root")
    for c in ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl",
              "socat", "ip", "ping", "ethtool"):
        if not shutil.which(c, path=ENV["PATH"]):
            raise BenchError("missing command %s" % c)
    if not api_up():
        log("neutron-server does not answer on 127.0.0.1:9696: running refenv setup.sh (AGENT=none)")
        sh("AGENT=none %s/setup.sh" % REFENV, timeout=900)
        if not api_up():
            raise BenchError("neutron-server still not answering after setup.sh")


def write_configs(heap_profile=False, debug=False):
    os.makedirs(ETC, exist_ok=True)
    os.makedirs(BASE + "/lock", exist_ok=True)
    os.makedirs(BASE + "/state", exist_ok=True)
    conf = open(REF_CONF).read()
    # Same file as refenv's; inside the netns 127.0.0.1:5672 is our relay to the host broker.
    # Private lock/state dirs so nothing is shared with the host's hv1 agent.
    conf = re.sub(r"(?m)^transport_url\s*=.*$", "transport_url = rabbit://guest:guest@127.0.0.1:5672/", conf)
    conf = re.sub(r"(?m)^lock_path\s*=.*$", "lock_path = %s/lock" % BASE, conf)
    conf = re.sub(r"(?m)^state_path\s*=.*$", "state_path = %s/state" % BASE, conf)
    open(ETC + "/neutron.conf", "w").write("# bench copy of %s\n%s" % (REF_CONF, conf))
    open(ETC + "/openvswitch_agent.ini", "w").write("""# bench: refenv's openvswitch_agent.ini for host %(host)s on the private OVS
[DEFAULT]
host = %(host)s
debug = %(debug)s

[ovs]
integration_bridge = br-int
tunnel_bridge = br-tun
local_ip = %(ip)s
bridge_mappings = physnet1:br-phys
datapath_type = netdev
ovsdb_connection = unix:%(ovsd)s/db.sock
of_listen_address = 127.0.0.1
of_listen_port = 6633

[agent]
tunnel_types = vxlan
l2_population = True
arp_responder = False

[securitygroup]
enable_security_group = True
firewall_driver = openvswitch

[ovsagent]
# ours only (the reference ignores the section). debug_pprof also turns heap
# profiling on (~1.4 MiB of its own), so it is set only with --heap-profile:
# the RSS figure is that of the configuration operators run.
debug_pprof = %(pprof)s
""" % {"host": HOST, "ip": LOCAL_IP, "ovsd": OVSD, "pprof": heap_profile, "debug": debug})


def netns_up():
    nss = sh(["ip", "netns", "list"]).split()
    if NS not in nss:
        sh(["ip", "netns", "add", NS])
    nsx(NS, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
    sh(["ip", "-n", NS, "link", "set", "lo", "up"])
    if sh(["ip", "-n", NS, "link", "show", "bench-ul"], check=False).strip() == "":
        # no dummy module on these machines: a veth pair whose peer stays down-to-earth in the netns
        sh(["ip", "-n", NS, "link", "add", "bench-ul", "type", "veth", "peer", "name", "bench-ul-p"])
        sh(["ip", "-n", NS, "link", "set", "bench-ul-p", "up"])
    sh(["ip", "-n", NS, "addr", "replace", LOCAL_IP + "/24", "dev", "bench-ul"])
    sh(["ip", "-n", NS, "link", "set", "bench-ul", "up"])
    # AMQP relay: netns 127.0.0.1:5672 -> unix socket -> host 127.0.0.1:5672
    if not recorded("relay-host", BASE):
        spawn("relay-host", ["socat", "UNIX-LISTEN:%s/amqp.sock,fork,unlink-early" % BASE,
                             "TCP:127.0.0.1:5672"], BASE + "/relay.log")
    if not recorded("relay-ns", BASE):
        spawn("relay-ns", ["ip", "netns", "exec", NS, "socat",
                           "TCP-LISTEN:5672,bind=127.0.0.1,fork,reuseaddr",
                           "UNIX-CONNECT:%s/amqp.sock" % BASE], BASE + "/relay.log")
    time.sleep(0.3)


def ovs_start(fresh):
    os.makedirs(OVSD, exist_ok=True)
    if fresh:
        ovs_stop()
        for f in os.listdir(OVSD):
            os.unlink(os.path.join(OVSD, f))
        sh(["ovsdb-tool", "create", OVSD + "/conf.db", SCHEMA])
    if not recorded("ovsdb-server", OVSD):
        sh(["ip", "netns", "exec", NS, "ovsdb-server", OVSD + "/conf.db", "--remote=punix:%s/db.sock" % OVSD,
            "--pidfile=%s/ovsdb-server.pid" % OVSD, "--unixctl=%s/ovsdb-server.ctl" % OVSD,
            "--log-file=%s/ovsdb-server.log" % OVSD, "-vconsole:off", "--detach", "--no-chdir"], env=OVS_ENV)
        shutil.copy(OVSD + "/ovsdb-server.pid", PIDS + "/ovsdb-server.pid")
        vsctl("--no-wait", "init")
        vsctl("--no-wait", "set", "open_vswitch", ".", "external_ids:hostname=" + HOST,
              "external_ids:system-id=bench-" + HOST)
    vswitchd_start()
    vsctl("--may-exist", "add-br", "br-phys", "--", "set", "bridge", "br-phys", "datapath_type=netdev")
    if not private_ovs_ok():
        raise BenchError("%s/db.sock is not our private ovsdb-server" % OVSD)


def vswitchd_start():
    if recorded("ovs-vswitchd", OVSD):
        return
    sh(["ip", "netns", "exec", NS, "ovs-vswitchd", "unix:%s/db.sock" % OVSD,
        "--pidfile=%s/ovs-vswitchd.pid" % OVSD, "--unixctl=%s/ovs-vswitchd.ctl" % OVSD,
        "--log-file=%s/ovs-vswitchd.log" % OVSD, "-vconsole:off", "--detach", "--no-chdir"], env=OVS_ENV)
    shutil.copy(OVSD + "/ovs-vswitchd.pid", PIDS + "/ovs-vswitchd.pid")


def vswitchd_stop(cleanup=True):
    p = recorded("ovs-vswitchd", OVSD)
    if not p:
        return
    args = ["ovs-appctl", "-t", OVSD + "/ovs-vswitchd.ctl", "exit"] + (["--cleanup"] if cleanup else [])
    sh(args, check=False, timeout=30)
    t0 = time.time()
    while alive(p) and time.time() - t0 < 10:
        time.sleep(0.05)
    if alive(p):
        stop_pid(p, OVSD, "ovs-vswitchd", 5)


def ovs_stop():
    vswitchd_stop()
    stop_pid(recorded("ovsdb-server", OVSD), OVSD, "ovsdb-server", 5)


def veths_create(ports):
    """veth pairs tap<id11> (OVS side) / v<id11>, both in the bench netns, mtu 1450, up."""
    have = set(re.findall(r"^\d+: (tap[0-9a-f-]{11})[@:]", sh(["ip", "-n", NS, "-o", "link"]), re.M))
    lines = []
    for p in ports:
        tap = "tap" + p["id"][:11]
        if tap in have:
            continue
        peer = "v" + p["id"][:11]
        lines += ["link add %s mtu 1450 type veth peer name %s mtu 1450" % (tap, peer),
                  "link set %s up" % tap, "link set %s up" % peer]
    if lines:
        sh(["ip", "-n", NS, "-batch", "-"], input="\n".join(lines) + "\n", timeout=600)


def plug(p):
    tap = "tap" + p["id"][:11]
    vsctl("--", "--may-exist", "add-port", "br-int", tap, "--", "set", "Interface", tap,
          "external_ids:iface-id=" + p["id"], "external_ids:attached-mac=" + p["mac"],
          "external_ids:iface-status=active", "external_ids:vm-uuid=" + p["device_id"])


def unplug(p):
    vsctl("--if-exists", "del-port", "br-int", "tap" + p["id"][:11])


def vms_up(vmports):
    """Two VMs, each its own netns, veth peer eth0 with the port's MAC/IP, tx checksum off."""
    for vm, p in zip(VMS, vmports):
        if vm not in sh(["ip", "netns", "list"]).split():
            sh(["ip", "netns", "add", vm])
        nsx(vm, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        tap = "tap" + p["id"][:11]
        if not sh(["ip", "-n", vm, "link", "show", "eth0"], check=False).strip():
            sh(["ip", "-n", NS, "link", "del", tap], check=False)
            sh(["ip", "link", "add", tap, "netns", NS, "mtu", "1450", "type", "veth", "peer", "name", "eth0",
                "netns", vm, "mtu", "1450"])
        sh(["ip", "-n", vm, "link", "set", "lo", "up"])
        sh(["ip", "-n", vm, "link", "set", "eth0", "address", p["mac"], "up"])
        sh(["ip", "-n", vm, "addr", "replace", p["ip"] + "/20", "dev", "eth0"])
        nsx(vm, "ethtool", "-K", "eth0", "tx", "off")
        sh(["ip", "-n", NS, "link", "set", tap, "up"])


# ------------------------------------------------------------------ agents
class Agent:
    def __init__(self, kind, ours_bin):
        self.kind = kind
        self.bin = ours_bin if kind == "ours" else "/usr/bin/neutron-openvswitch-agent"
        self.logfile = os.path.join(OUT, "agent-%s.log" % kind)
        self.pid = None
        self.must = self.bin

    def argv(self):
        # A private mount namespace in which /run/openvswitch IS the private OVS rundir: helpers
        # started through sudo lose OVS_RUNDIR, and the reference's privsep ovs-vsctl (Manager
        # for ovsdb_connection) or rootwrap ovs-ofctl would otherwise reach the SYSTEM OVS.
        a = ["ip", "netns", "exec", NS, "unshare", "-m", "--propagation", "private", "sh", "-c",
             'mount --bind "$0" /run/openvswitch && exec "$@"', OVSD,
             "env", "OVS_RUNDIR=" + OVSD, self.bin,
             "--config-file", ETC + "/neutron.conf", "--config-file", ETC + "/openvswitch_agent.ini",
             "--log-file", self.logfile]
        return a

    def start(self):
        self.log_offset = os.path.getsize(self.logfile) if os.path.exists(self.logfile) else 0
        p = spawn("agent", self.argv(), os.path.join(OUT, "agent-%s.stdout" % self.kind), env=OVS_ENV)
        self.pid = p.pid
        self.proc = p
        self.t_start = time.time()
        log("%s agent started, pid %d" % (self.kind, self.pid))

    def running(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM (SIGKILL after 20 s); returns seconds until gone."""
        d = stop_pid(self.pid, self.bin, "%s agent" % self.kind, 20)
        try:
            self.proc.wait(timeout=5)
        except Exception:
            pass
        return d

    def stop_helpers(self):
        """Helpers left in the netns (the reference's privsep daemons) once the agent is gone."""
        for p in agent_pids():
            c = cmdline(p)
            if "privsep-helper" in c or "neutron-rootwrap" in c or "ovsdb-client" in c or self.bin in c:
                stop_pid(p, c[:40], "helper %s" % c[:60], 5)

    def wait_alive(self, timeout=120):
        """Agent row for hvbench with alive=true and a heartbeat after our start."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if not self.running():
                raise BenchError("%s agent exited; see %s" % (self.kind, self.logfile))
            ags = api("GET", "/agents?host=%s&binary=neutron-openvswitch-agent" % HOST)["agents"]
            if ags and ags[0]["alive"] and self.started_reporting(ags[0]):
                return time.time() - self.t_start
            time.sleep(0.5)
        raise BenchError("%s agent not alive in the API after %ds" % (self.kind, timeout))

    def started_reporting(self, ag):
        # a heartbeat (state report) sent after this process started
        try:
            import calendar
            st = calendar.timegm(time.strptime(ag["heartbeat_timestamp"], "%Y-%m-%d %H:%M:%S"))
        except Exception:
            return True
        return st >= int(self.t_start) - 1

    def in_sync(self):
        """ours: /healthz; reference: a completed rpc_loop line of this pid in the log."""
        if self.kind == "ours":
            r = subprocess.run(["ip", "netns", "exec", NS, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                "--max-time", "1", "http://127.0.0.1:19696/healthz"],
                               capture_output=True, text=True, env=ENV)
            return r.stdout.strip() == "200"
        return self.first_loop_line() is not None

    def first_loop_line(self):
        try:
            with open(self.logfile, errors="replace") as f:
                f.seek(self.log_offset)
                for l in f:
                    if (" %d INFO " % self.pid) in l and "rpc_loop - iteration:" in l and "completed" in l:
                        return l
        except OSError:
            pass
        return None

    def metrics(self):
        if self.kind != "ours":
            return ""
        return nsx(NS, "curl", "-s", "--max-time", "3", "http://127.0.0.1:19696/metrics", check=False)


STAGES = ("vswitchd", "server_data", "agent", "dataplane", "report_queue", "server")
_HIST = re.compile(r'^(ovsagent_port_wiring_stage_seconds)_(sum|count|bucket)'
                   r'(?:\{([^}]*)\})? ([0-9.eE+-]+|\+Inf)$')


def wiring_hist(text):
    """The stage histograms of one /metrics scrape: stage -> {"sum", "count", "buckets": {le: n}}
    (the agent's own share is the stage "agent")."""
    out = {}
    for line in text.splitlines():
        m = _HIST.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        key = labels.get("stage", "")
        h = out.setdefault(key, {"sum": 0.0, "count": 0, "buckets": {}})
        v = float(m.group(4))
        if m.group(2) == "bucket":
            h["buckets"][labels["le"]] = v
        else:
            h[m.group(2)] = v
    return out


def wiring_stages(after, before):
    """Per-port stage figures between two scrapes: stage -> (mean s, ports, p99 bucket bound s,
    share of ports at or under 20 ms)."""
    a, b = wiring_hist(after), wiring_hist(before or "")
    res = {}
    for key in STAGES:
        if key not in a:
            continue
        z = b.get(key, {"sum": 0.0, "count": 0, "buckets": {}})
        n = a[key]["count"] - z["count"]
        if n <= 0:
            continue
        mean = (a[key]["sum"] - z["sum"]) / n
        les = sorted((float(le), a[key]["buckets"][le] - z["buckets"].get(le, 0)) for le in a[key]["buckets"])
        p99 = next((le for le, c in les if c >= 0.99 * n), float("inf"))
        le20 = next((c for le, c in les if abs(le - 0.02) < 1e-9), 0) / n
        res[key] = (mean, int(n), p99, le20)
    return res


def settle(agent, quiet_ticks=10, window=2.0, timeout=300):
    """Wait until the agent's processes use < quiet_ticks CPU ticks per window (the reference keeps
    working for a whole rpc_loop after ports turn ACTIVE)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        pids = agent_pids()
        a = {p: cpu_ticks(p) for p in pids}
        time.sleep(window)
        d = sum(cpu_ticks(p) - a[p] for p in pids if p in a)
        if d < quiet_ticks:
            return time.time() - t0
    log("agent did not settle within %ds" % timeout)
    return None


# ------------------------------------------------------------------ measurements
def pct(xs, q):
    xs = sorted(xs)
    import math
    k = max(0, min(len(xs) - 1, int(math.ceil(q / 100.0 * len(xs))) - 1))
    return xs[k]


def floor_single(net, n):
    out = sh(["/usr/bin/python3", FLOOR, net, HOST, str(n), "1", PROJ], timeout=900)
    save("floor.txt", "floor.py %s %s %d 1 -> %s" % (net, HOST, n, out.strip()))
    return float(out.split()[-1])


def floor_bulk(net, n, chunk):
    t0 = time.time()
    out = sh(["/usr/bin/python3", FLOOR, net, HOST, str(n), str(chunk), PROJ], timeout=3600)
    save("floor.txt", "floor.py %s %s %d %d -> %s  (whole run incl. port create/delete %.1fs)"
         % (net, HOST, n, chunk, out.strip(), time.time() - t0))
    return float(out.split()[-1])


def restart_floor(net):
    """The server's own cost of loading the host's ports once (pullfloor.py, neutron's RPC client,
    no agent): what any agent's start waits for before it knows its ports. None when the ports do
    not share one security group."""
    ports = api("GET", "/ports?network_id=%s&fields=id&fields=security_groups" % net)["ports"]
    sgs = sorted({sg for p in ports for sg in p["security_groups"]})
    if len(sgs) != 1:
        log("restart floor left out: the ports are in %d security groups" % len(sgs))
        return None
    ids = os.path.join(BASE, "restart-floor-ids.txt")
    with open(ids, "w") as f:
        f.write("".join(p["id"] + "\n" for p in ports))
    out = sh(["/usr/bin/python3", PULLFLOOR, sgs[0], ids], timeout=900)
    save("restart-floor.txt", "pullfloor.py %s <%d port ids> ->\n%s" % (sgs[0], len(ports), out.strip()))
    m = re.search(r"(?m)^by-group (\S+)", out)
    return float(m.group(1)) if m else None


def delete_floor_ports(net):
    """Ports floor.py created and could not delete (named floor-*)."""
    left = [p["id"] for p in api("GET", "/ports?network_id=%s&fields=id&fields=name" % net)["ports"]
            if p["name"].startswith("floor-")]
    if left:
        log("deleting %d ports floor.py left behind" % len(left))
        delete_ports(left)


def measure_single(agent, net, ports, samples):
    times = []
    for p in ports[:samples]:
        t0 = time.time()
        plug(p)
        while True:
            st = api("GET", "/ports/%s?fields=status" % p["id"])["port"]["status"]
            if st == "ACTIVE":
                break
            if time.time() - t0 > 60:
                raise BenchError("single port %s not ACTIVE after 60s" % p["id"])
            time.sleep(0.02)
        times.append(time.time() - t0)
        time.sleep(0.5)
    save("single-%s.txt" % agent.kind, " ".join("%.3f" % t for t in times))
    for p in ports[:samples]:
        unplug(p)
    d = wait_status(net, [p["id"] for p in ports[:samples]], "DOWN", 300)
    if d is None:
        raise BenchError("single-port samples not DOWN after unplug")
    return statistics.median(times), pct(times, 99), times


def measure_plug(agent, net, ports, timeout):
    ids = [p["id"] for p in ports]
    t0 = time.time()
    for p in ports:
        plug(p)
    t1 = time.time()
    d = wait_status(net, ids, "ACTIVE", timeout, "plug-%s-%d.series" % (agent.kind, len(ports)), t0)
    return t1 - t0, d


def measure_unplug(agent, net, ports, timeout):
    ids = [p["id"] for p in ports]
    t0 = time.time()
    for p in ports:
        unplug(p)
    t1 = time.time()
    d = wait_status(net, ids, "DOWN", timeout, "unplug-%s-%d.series" % (agent.kind, len(ports)), t0)
    return t1 - t0, d


def measure_resources(agent, idle_s):
    pids = agent_pids()
    lines = []
    for p in pids:
        lines.append("%7d %8d KiB (%s)  %s" % (p, rss_kib(p), rss_split(p), cmdline(p)[:160]))
    rss = sum(rss_kib(p) for p in pids)
    save("resources-%s.txt" % agent.kind, "processes in netns %s (agent + helpers):\n%s\nRSS total %d KiB"
         % (NS, "\n".join(lines), rss))
    a = {p: cpu_ticks(p) for p in pids}
    t0 = time.time()
    time.sleep(idle_s)
    dt = time.time() - t0
    ticks = sum(cpu_ticks(p) - a[p] for p in pids)
    cpu = ticks / float(CLK_TCK)
    rss_idle = sum(rss_kib(p) for p in pids if alive(p))
    save("resources-%s.txt" % agent.kind, "idle %.1fs: %d ticks = %.2f CPU s = %.2f %% of one core; RSS total after it %d KiB (%s)"
         % (dt, ticks, cpu, cpu / dt * 100, rss_idle, "; ".join(rss_split(p) for p in pids if alive(p))))
    return rss, rss_idle, cpu, dt, len(pids)


def flows():
    return {br: ofctl_count(br) for br in ("br-int", "br-tun", "br-phys")}


class Pinger:
    """ping -D -i 0.1 from VM1 to VM2 for the duration of a measurement."""

    def __init__(self, name, dst):
        self.file = os.path.join(OUT, name)
        self.f = open(self.file, "w")
        self.p = subprocess.Popen(["ip", "netns", "exec", VMS[0], "ping", "-D", "-i", "0.1", "-W", "1", dst],
                                  stdout=self.f, stderr=subprocess.STDOUT, env=ENV, start_new_session=True)
        record("ping", self.p.pid)

    def stop(self):
        if alive(self.p.pid) and "ping" in cmdline(self.p.pid):
            os.kill(self.p.pid, signal.SIGINT)
        self.p.wait(timeout=10)
        self.f.close()
        txt = open(self.file).read()
        m = re.search(r"(\d+) packets transmitted, (\d+) received", txt)
        replies = [float(x) for x in re.findall(r"^\[(\d+\.\d+)\] \d+ bytes from", txt, re.M)]
        tx, rx = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        # The echo sent last may still be in flight when SIGINT stops ping, which then counts it
        # lost (run 9: 1 of 161 "lost" with no gap in the replies, RTTs up to 172 ms at 1,000
        # ports). It is not counted as sent; any earlier unanswered echo is lost.
        seqs = {int(x) for x in re.findall(r"icmp_seq=(\d+)", txt)}
        if tx > 0 and tx not in seqs:
            tx -= 1
        return tx, rx, replies


def measure_restart(agent, net, vm_ip, sync_timeout):
    revs0 = {p["id"]: p["revision_number"] for p in
             api("GET", "/ports?network_id=%s&fields=id&fields=revision_number" % net)["ports"]}
    m0 = agent.metrics()
    pg = Pinger("restart-%s.ping" % agent.kind, vm_ip)
    time.sleep(3)
    t_kill = time.time()
    gone = agent.stop()
    agent.start()
    t_start = agent.t_start
    t_sync, m_sync = None, ""
    while time.time() - t_start < sync_timeout:
        if agent.in_sync():
            t_sync = time.time()
            m_sync = agent.metrics()
            break
        if not agent.running():
            raise BenchError("%s agent exited after restart" % agent.kind)
        time.sleep(0.05)
    time.sleep(5)
    tx, rx, _ = pg.stop()
    revs1 = {p["id"]: p["revision_number"] for p in
             api("GET", "/ports?network_id=%s&fields=id&fields=revision_number" % net)["ports"]}
    changed = sum(1 for k, v in revs0.items() if revs1.get(k) != v)
    first = agent.first_loop_line() if agent.kind == "reference" else ""
    m1 = agent.metrics()
    save("restart-%s.txt" % agent.kind, "kill->gone %.2fs; start->in sync %s; kill->in sync %s; ping tx %d rx %d; "
         "ports with changed revision_number %d/%d\nfirst loop line: %s\nmetrics before:\n%s\nmetrics after:\n%s"
         % (gone or 0, "%.2f" % (t_sync - t_start) if t_sync else "TIMEOUT",
            "%.2f" % (t_sync - t_kill) if t_sync else "TIMEOUT", tx, rx, changed, len(revs0), first,
            _rpcmetrics(m0), _rpcmetrics(m1)))
    # Ours: the server's share of the way to in sync, from the new run's own RPC timings.
    pulls = re.search(r'(?m)^ovsagent_rpc_duration_seconds_sum\{method="bulk_pull"\} (\S+)$', m_sync)
    return {"gone": gone, "sync": (t_sync - t_start) if t_sync else None, "lost": tx - rx, "tx": tx,
            "rev_changed": changed, "server_pulls": float(pulls.group(1)) if pulls else None}


def _rpcmetrics(m):
    return "\n".join(l for l in m.splitlines() if not l.startswith("#") and
                     ("rpc" in l or "sync" in l or "device" in l or "wired" in l))[:6000]


def measure_vswitchd_restart(agent, vm_ip, timeout):
    """Stop and start the private ovs-vswitchd with a 100 ms ping running; recovery is the time
    from the stop until replies flow without a gap again (the reference's first reply can be
    followed by a second outage when it re-initialises its firewall)."""
    pg = Pinger("vswitchd-restart-%s.ping" % agent.kind, vm_ip)
    time.sleep(3)
    t0 = time.time()
    vswitchd_stop(cleanup=False)
    t_stopped = time.time()
    vswitchd_start()
    t_started = time.time()
    first = None
    while time.time() - t0 < timeout:
        time.sleep(0.2)
        txt = open(pg.file).read()
        after = [float(x) for x in re.findall(r"^\[(\d+\.\d+)\] \d+ bytes from", txt, re.M) if float(x) > t_started]
        if after:
            first = after[0] - t0
            break
    settle(agent, timeout=min(timeout, 300))
    time.sleep(5)
    tx, rx, replies = pg.stop()
    rec = None
    if first is not None:
        rs = [r for r in replies if r > t0 - 0.5]
        rec = first
        for a, b in zip(rs, rs[1:]):
            if b - a > 0.35 and b > t0:
                rec = b - t0
    save("vswitchd-restart-%s.txt" % agent.kind, "stop %.2fs, start %.2fs, first ping reply %s s after stop began, "
         "replies without gap from %s s; ping tx %d rx %d"
         % (t_stopped - t0, t_started - t_stopped, "%.2f" % first if first else "TIMEOUT",
            "%.2f" % rec if rec else "TIMEOUT", tx, rx))
    return rec, tx - rx


def build_ours():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs("/tmp/ovsbench-bin", exist_ok=True)
    rev = sh(["git", "-C", root, "rev-parse", "--short", "HEAD"], check=False).strip()
    log("go build -o /tmp/ovsbench-bin/ovs-agent ./cmd/ovs-agent (HEAD %s)" % rev)
    # CGO_ENABLED=0, as scripts/demo.sh builds it: a static binary, no libc/ld.so mapped (1.4 MiB RSS)
    env = dict(ENV, PATH=ENV["PATH"] + ":/usr/local/go/bin", HOME=os.environ.get("HOME", "/root"), CGO_ENABLED="0")
    r = subprocess.run(["go", "build", "-o", "/tmp/ovsbench-bin/ovs-agent", "./cmd/ovs-agent"], cwd=root, env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise BenchError("go build failed: %s" % r.stderr[-2000:])
    save("env.txt", "ours: built from HEAD %s" % rev)
    return "/tmp/ovsbench-bin/ovs-agent"


# ------------------------------------------------------------------ phases
def run_agent(kind, args, ours_bin, net, floor_res, results):
    R = results.setdefault(kind, {})
    if kind == "ours" and not ours_bin:
        ours_bin = build_ours()
    ovs_start(fresh=True)
    agent = Agent(kind, ours_bin)
    agent.start()
    try:
        R["alive_s"] = agent.wait_alive()
        log("%s agent alive in the API after %.1fs" % (kind, R["alive_s"]))
        # br-int must exist before ports are plugged
        t0 = time.time()
        while "br-int" not in vsctl("list-br").split():
            if time.time() - t0 > 120:
                raise BenchError("%s agent did not create br-int" % kind)
            time.sleep(0.2)
        # the port pool and the two VMs (created once per run, while an agent is alive on hvbench)
        pool = ensure_ports(net, max(args.ports + [args.samples]), args)
        vmp = pool["vms"]
        ports = pool["ports"]
        veths_create(ports)
        vms_up(vmp)
        if not private_ovs_ok():
            raise BenchError("%s/db.sock is no longer our private ovsdb-server" % OVSD)
        for p in vmp:
            plug(p)
        d = wait_status(net, [p["id"] for p in vmp], "ACTIVE", 300)
        if d is None:
            raise BenchError("VM ports not ACTIVE with %s agent" % kind)
        log("2 VM ports ACTIVE after %.1fs" % d)
        ok = nsx(VMS[0], "ping", "-c", "3", "-i", "0.2", "-W", "2", vmp[1]["ip"], check=False)
        R["vm_ping"] = " 0% packet loss" in ok
        log("vm ping %s" % ("ok" if R["vm_ping"] else "FAILED:\n" + ok))
        settle(agent)

        if args.floor and not floor_res:
            log("floor: single (%d ports, CHUNK=1)" % args.samples)
            floor_res["single"] = floor_single(net, args.samples)
            for n in args.ports:
                if n > args.floor_max:
                    continue
                chunk = n if n <= 100 else 100
                log("floor: bulk %d (CHUNK=%d)" % (n, chunk))
                try:
                    floor_res[n] = floor_bulk(net, n, chunk)
                except BenchError as e:
                    # floor.py creates its N ports in one POST; at 1,000 the
                    # server may not answer within its 300 s: no floor for
                    # this N, and the ports it left behind go.
                    log("floor %d failed, left out: %s" % (n, str(e).splitlines()[0]))
                    delete_floor_ports(net)
            log("floor: %s" % floor_res)

        log("single-port plug -> ACTIVE, %d samples" % args.samples)
        p50, p99, _ = measure_single(agent, net, ports, args.samples)
        last_scrape = ""
        if kind == "ours":
            last_scrape = agent.metrics()
            save("metrics-ours-after-single.txt", last_scrape)
            R["stages_single"] = wiring_stages(last_scrape, "")
        R["single"] = (p50, p99)
        log("single p50 %.3f p99 %.3f" % (p50, p99))
        settle(agent)

        nmax = max(args.ports)
        for n in sorted(args.ports):
            to = min(args.max_wait, 60 + 1.5 * n)
            log("plug %d ports back to back (timeout %ds)" % (n, to))
            loop, d = measure_plug(agent, net, ports[:n], to)
            R["plug%d" % n] = (loop, d)
            log("N=%d add-port loop %.2fs, all ACTIVE %s" % (n, loop, "%.2fs" % d if d else "TIMEOUT"))
            if kind == "ours":
                time.sleep(1)
                scrape = agent.metrics()
                save("metrics-ours-after-plug%d.txt" % n, scrape)
                R["stages%d" % n] = wiring_stages(scrape, last_scrape)
                log("N=%d where the time went (mean per port, s): %s" % (n, R["stages%d" % n]))
            if n == nmax and d is not None:
                R["settle"] = settle(agent)
                R["flows"] = flows()
                log("flows %s" % R["flows"])
                rss, rss_idle, cpu, dt, np_ = measure_resources(agent, args.idle)
                R["rss"], R["rss_idle"], R["cpu"], R["nprocs"] = rss, rss_idle, cpu, np_
                log("RSS %d KiB (%d processes), %d KiB after the idle window; idle CPU %.2fs over %.0fs"
                    % (rss, np_, rss_idle, cpu, dt))
                if kind == "ours" and args.heap_profile:
                    # After the RSS and idle figures, which it would disturb; gc=1: live objects only.
                    nsx(NS, "curl", "-s", "--max-time", "30", "-o", os.path.join(OUT, "heap-ours-%d.pprof" % n),
                        "http://127.0.0.1:19696/debug/pprof/heap?gc=1", check=False)
                if args.restart:
                    log("agent restart with %d+2 ports, ping %s -> %s every 100 ms" % (n, VMS[0], VMS[1]))
                    R["restart"] = measure_restart(agent, net, vmp[1]["ip"], args.max_wait)
                    log("restart: %s" % R["restart"])
                    if "restart" not in floor_res:
                        try:
                            floor_res["restart"] = restart_floor(net)
                        except (BenchError, subprocess.TimeoutExpired) as e:
                            log("restart floor failed, left out: %s" % str(e).splitlines()[0])
                            floor_res["restart"] = None
                        log("restart floor (the server loads the %d+2 ports once): %s s" % (n, floor_res["restart"]))
                    settle(agent)
                    log("ovs-vswitchd restart")
                    R["vswitchd"] = measure_vswitchd_restart(agent, vmp[1]["ip"], args.max_wait)
                    log("vswitchd restart: pings back (no gap) after %s s, lost %d" % R["vswitchd"])
                    settle(agent)
                    R["flows_after"] = flows()
            to = min(args.max_wait, 60 + 1.0 * n)
            log("unplug %d ports (timeout %ds)" % (n, to))
            loop, d = measure_unplug(agent, net, ports[:n], to)
            R["unplug%d" % n] = (loop, d)
            log("N=%d unplug loop %.2fs, all DOWN %s" % (n, loop, "%.2fs" % d if d else "TIMEOUT"))
            if kind == "ours":
                last_scrape = agent.metrics()
                save("metrics-ours-after-unplug%d.txt" % n, last_scrape)
            if d is None:
                break
            settle(agent)
        for p in vmp:
            unplug(p)
        wait_status(net, [p["id"] for p in vmp], "DOWN", 120)
    finally:
        agent.stop()
        agent.stop_helpers()
        ovs_stop()
        g = system_guard(["tap" + p["id"][:11] for p in POOL.get("ports", []) + POOL.get("vms", [])])
        if g:
            R["system_guard"] = g
    return R


POOL = {}


def ensure_ports(net, n, args):
    if POOL:
        return POOL
    if n + 2 + 100 > 450:
        # the default port quota is 500 per project; the project is the harness's own
        try:
            api("PUT", "/quotas/" + PROJ, {"quota": {"port": -1}})
            log("port quota of project %s set to unlimited" % PROJ)
        except BenchError as e:
            log("could not raise the port quota of %s: %s" % (PROJ, e))
    old = our_ports(net)
    if old:
        log("deleting %d leftover bench ports" % len(old))
        delete_ports([p["id"] for p in old])
    t0 = time.time()
    vms = create_ports(net, [PORT_PREFIX + "vm1", PORT_PREFIX + "vm2"])
    ports = create_ports(net, ["%sp%04d" % (PORT_PREFIX, i) for i in range(n)])
    bad = [p for p in vms + ports if p["vif_type"] in ("binding_failed", "unbound")]
    if bad:
        raise BenchError("%d ports not bound (vif_type %s)" % (len(bad), bad[0]["vif_type"]))
    log("created %d ports in %.1fs" % (n + 2, time.time() - t0))
    save("ports.txt", "\n".join("%s %s %s %s" % (p["name"], p["id"], p["mac"], p["ip"]) for p in vms + ports))
    POOL.update(vms=vms, ports=ports)
    return POOL


def cleanup(net=None):
    """Everything we created: agent, OVS, relay, netns, bench ports."""
    system_guard()
    for name, must in (("agent", "agent"), ("ping", "ping")):
        p = recorded(name, must)
        if p:
            stop_pid(p, must, name, 20)
    if os.path.exists("/run/netns/" + NS):
        for p in agent_pids():
            stop_pid(p, cmdline(p)[:30], "leftover " + cmdline(p)[:50], 5)
    ovs_stop()
    for name in ("relay-ns", "relay-host"):
        stop_pid(recorded(name, "socat"), "socat", name, 5)
    for ns in (NS,) + VMS:
        if os.path.exists("/run/netns/" + ns):
            for p in procs_in_ns(ns):
                c = cmdline(p)
                stop_pid(p, c[:30], "leftover in %s: %s" % (ns, c[:50]), 5)
            sh(["ip", "netns", "del", ns], check=False)
    if api_up():
        nets = api("GET", "/networks?name=%s" % NET_NAME)["networks"]
        for n in nets:
            old = our_ports(n["id"])
            if old:
                log("deleting %d bench ports" % len(old))
                delete_ports([p["id"] for p in old])
            leftover = api("GET", "/ports?network_id=%s&fields=id&fields=name" % n["id"])["ports"]
            if not leftover:
                api("DELETE", "/networks/" + n["id"])
            else:
                log("network %s kept: %d foreign ports" % (NET_NAME, len(leftover)))


# ------------------------------------------------------------------ table
def fmt(x, unit="s", nd=2):
    if x is None:
        return "timeout"
    return ("%." + str(nd) + "f%s") % (x, unit)


def table(args, floor_res, results, cmd):
    kinds = [k for k in ("reference", "ours") if k in results]
    rows = []
    hdr = "| measure | server floor | " + " | ".join(kinds) + " |"
    rows.append(hdr)
    rows.append("|---" * (2 + len(kinds)) + "|")

    def row(name, floor, f):
        vals = []
        for k in kinds:
            try:
                vals.append(f(results[k]))
            except (KeyError, TypeError):
                vals.append("—")
        rows.append("| %s | %s | %s |" % (name, floor, " | ".join(vals)))
    row("single port plug → ACTIVE p50 / p99 (%d samples)" % args.samples,
        fmt(floor_res.get("single")) + " p50" if floor_res.get("single") else "—",
        lambda r: "%s / %s" % (fmt(r["single"][0]), fmt(r["single"][1])))
    for n in sorted(args.ports):
        row("%d ports plugged back to back → all ACTIVE (add-port loop)" % n,
            fmt(floor_res.get(n)) if n in floor_res else "—",
            lambda r, n=n: "%s (%s)" % (fmt(r["plug%d" % n][1]), fmt(r["plug%d" % n][0])))
        row("%d ports unplugged → all DOWN" % n, "—",
            lambda r, n=n: fmt(r["unplug%d" % n][1]))
    def stages(r, key):
        st = r[key]
        ag = st["agent"]
        return "%s / %s / **%s** (p99 ≤ %s, %.0f %% ≤ 20 ms) / %s / %s / %s" % tuple(
            [fmt(st[k][0] * 1000, "", 1) if k in st else "—" for k in STAGES[:2]] +
            [fmt(ag[0] * 1000, "", 1), fmt(ag[2] * 1000, "", 0), ag[3] * 100] +
            [fmt(st[k][0] * 1000, "", 1) if k in st else "—" for k in STAGES[3:]])
    for key, what in [("stages_single", "single ports")] + [("stages%d" % n, "%d ports" % n) for n in sorted(args.ports)]:
        row("where a port's time went, %s, mean ms: vswitchd / server data / **agent** / dataplane (OVSDB tag + bundle) / call slot / server reply" % what,
            "—", lambda r, key=key: stages(r, key))
    nmax = max(args.ports)
    row("RSS agent + helpers at %d+2 ports: settled / after %ds idle" % (nmax, args.idle), "—",
        lambda r: "%.1f / %.1f MiB (%d procs)" % (r["rss"] / 1024.0, r.get("rss_idle", 0) / 1024.0, r["nprocs"]))
    row("CPU idle %ds (agent + helpers)" % args.idle, "—",
        lambda r: "%.2f s (%.2f %% of a core)" % (r["cpu"], r["cpu"] / args.idle * 100))
    if args.restart:
        row("restart at %d+2 ports: pings lost (of sent, 100 ms)" % nmax, "—",
            lambda r: "%d of %d" % (r["restart"]["lost"], r["restart"]["tx"]))
        row("restart: start → in sync (kill → gone)",
            fmt(floor_res["restart"]) + " (the server loads the ports once)" if floor_res.get("restart") else "—",
            lambda r: "%s (%s)" % (fmt(r["restart"]["sync"]), fmt(r["restart"]["gone"])))
        # A sum of call durations: calls that overlap (groups and rules, id chunks) count twice.
        row("restart: the server's bulk_pull calls, summed (some overlap)", "—",
            lambda r: fmt(r["restart"]["server_pulls"]) if r["restart"].get("server_pulls") is not None else "—")
        row("restart: ports whose revision changed (status flaps)", "—",
            lambda r: "%d" % r["restart"]["rev_changed"])
        row("ovs-vswitchd restart → pings back (lost)", "—",
            lambda r: "%s (%d)" % (fmt(r["vswitchd"][0]), r["vswitchd"][1]))
    row("flows br-int / br-tun / br-phys at %d+2 ports" % nmax, "—",
        lambda r: "%d / %d / %d" % (r["flows"]["br-int"], r["flows"]["br-tun"], r["flows"]["br-phys"]))
    return "\n".join(rows)


def main():
    global OUT
    ap = argparse.ArgumentParser(description="ovsagent benchmark (see bench/README.md)")
    ap.add_argument("--agent", default="both", choices=["ours", "reference", "both"])
    ap.add_argument("--ports", default="20,100,1000", help="N values, comma separated")
    ap.add_argument("--samples", type=int, default=20, help="single-port samples")
    ap.add_argument("--idle", type=float, default=60, help="idle CPU window, seconds")
    ap.add_argument("--max-wait", type=float, default=900, help="cap for every wait, seconds")
    ap.add_argument("--no-floor", dest="floor", action="store_false")
    ap.add_argument("--floor-max", type=int, default=1000,
                    help="skip the floor for N above this")
    ap.add_argument("--no-restart", dest="restart", action="store_false")
    ap.add_argument("--ours-bin", default="")
    ap.add_argument("--heap-profile", action="store_true",
                    help="run ours with debug_pprof and save a heap profile at the largest N (adds ~1.4 MiB to its RSS)")
    ap.add_argument("--debug-log", action="store_true",
                    help="debug = True for the agent: a log line per batch and per update_device_list, for diagnosis (not for the table)")
    ap.add_argument("--out", default="")
    ap.add_argument("--cleanup-only", action="store_true")
    ap.add_argument("--keep", action="store_true", help="do not delete ports/netns at the end")
    args = ap.parse_args()
    args.ports = [int(x) for x in args.ports.split(",") if x]
    os.makedirs(PIDS, exist_ok=True)
    if args.cleanup_only:
        cleanup()
        return 0
    OUT = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   time.strftime("%Y-%m-%dT%H%M%SZ", time.gmtime()))
    os.makedirs(OUT, exist_ok=True)
    cmd = "bench/run.sh " + " ".join(sys.argv[1:])
    save("env.txt", "date %s\ncommand %s\nnproc %d\nloadavg %s\nkernel %s\novs %s\nneutron-server rpc/api workers: %s"
         % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), cmd, os.cpu_count(),
            open("/proc/loadavg").read().strip(), os.uname().release,
            sh(["ovs-vswitchd", "--version"]).splitlines()[0],
            sh("grep -E '^(rpc_workers|api_workers|rpc_state_report_workers)' %s | tr '\\n' ' '" % REF_CONF)))
    kinds = ["reference", "ours"] if args.agent == "both" else [args.agent]
    results, floor_res = {}, {}
    rc = 0
    try:
        env_check()
        cleanup()
        write_configs(args.heap_profile, args.debug_log)
        netns_up()
        net = ensure_network()
        log("network %s %s; results in %s" % (NET_NAME, net, OUT))
        for k in kinds:
            log("========== %s agent ==========" % k)
            try:
                run_agent(k, args, args.ours_bin, net, floor_res, results)
            except BenchError as e:
                log("ERROR with %s agent: %s" % (k, e))
                results.setdefault(k, {})["error"] = str(e)
                rc = 1
            save("results.json", json.dumps({"floor": floor_res, "results": results}, default=str, indent=1))
    except BenchError as e:
        log("ERROR: %s" % e)
        rc = 1
    except KeyboardInterrupt:
        log("interrupted")
        rc = 130
    finally:
        if not args.keep:
            try:
                cleanup()
            except Exception as e:
                log("cleanup: %s" % e)
                rc = rc or 1
    t = table(args, floor_res, results, cmd)
    hdr = ("%s, %d cores, userspace datapath (netdev), private OVS in netns %s, host %s\ncommand: %s\n"
           % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(), NS, HOST, cmd))
    errs = "".join("\n%s: ERROR %s" % (k, r["error"]) for k, r in results.items() if "error" in r)
    save("table.md", hdr + "\n" + t + errs)
    print("\n" + hdr + "\n" + t + errs)
    return rc


if __name__ == "__main__":
    sys.exit(main())
