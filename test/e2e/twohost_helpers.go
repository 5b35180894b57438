//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two hypervisors on one machine, as refenv/twohost/twohost.sh builds
// them with UNDERLAY_ONLY=1, written in Go so that a test sets up and tears
// down everything itself: each hypervisor is a network namespace running its
// own ovsdb-server and ovs-vswitchd (netdev datapath, OVS_RUNDIR private),
// the two joined by a veth underlay whose addresses sit on an OVS internal
// port (br-underlay), as OVS userspace tunnelling needs; an AMQP relay
// (socat) makes the host's RabbitMQ reachable as 127.0.0.1:5672 inside each
// namespace; and one ovs-agent runs inside each namespace as its hypervisor.
//
// Names are our own (netns e2e-hva/e2e-hvb, neutron hosts e2e-hv-a/e2e-hv-b,
// /tmp/ovsagent-e2e/twohost) so that neither the single-host suite (hv1 on
// the system OVS) nor a manual twohost.sh run (hv1/hv2) is disturbed.

const (
	twoHostBase   = "/tmp/ovsagent-e2e/twohost"
	underlayNet   = "172.31.255"
	ovsSchemaPath = "/usr/share/openvswitch/vswitch.ovsschema"
)

// Hypervisor is one simulated hypervisor.
type Hypervisor struct {
	Name    string // neutron host (binding:host_id), e.g. e2e-hv-a
	NS      string // network namespace holding its OVS, taps and agent
	Dir     string // db, sockets, pid and log files
	N       int    // 1 or 2: underlay address 172.31.255.N
	LocalIP string
	OVS     OVS
	Agent   *Agent

	relays []*exec.Cmd
}

// TwoHost is the pair, built by NewTwoHost.
type TwoHost struct {
	e  *Env
	HV [2]*Hypervisor
}

// tunnelPortName is neutron's tunnel port name for a remote IPv4 address:
// <type>-<8 hex digits of the address>.
func tunnelPortName(typ, remoteIP string) string {
	var b strings.Builder
	b.WriteString(typ + "-")
	for _, p := range strings.Split(remoteIP, ".") {
		n, _ := strconv.Atoi(p)
		fmt.Fprintf(&b, "%02x", n)
	}
	return b.String()
}

// Peer is the other hypervisor.
func (th *TwoHost) Peer(h *Hypervisor) *Hypervisor {
	if h == th.HV[0] {
		return th.HV[1]
	}
	return th.HV[0]
}

// NewTwoHost builds both hypervisors and starts one agent in each (alive in
// the API before it returns). Everything is removed at cleanup.
func NewTwoHost(e *Env, agentTimeout time.Duration) *TwoHost {
	e.T.Helper()
	th := newTwoHostOVS(e)
	for _, h := range th.HV {
		a, took := e.StartAgentAlive(h.AgentConfig(), agentTimeout)
		h.Agent = a
		e.T.Logf("%s: agent alive %s after start (netns %s, log %s)", h.Name, took.Round(time.Millisecond), h.NS, a.LogPath)
	}
	return th
}

// newTwoHostOVS builds both hypervisors without starting any agent.
func newTwoHostOVS(e *Env) *TwoHost {
	e.T.Helper()
	for _, c := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ip", "ethtool", "ping", "socat"} {
		if _, err := exec.LookPath(c); err != nil {
			e.T.Fatalf("twohost: %s is missing (.ci/run installs it)", c)
		}
	}
	th := &TwoHost{e: e}
	for i, s := range []string{"a", "b"} {
		dir := filepath.Join(twoHostBase, "hv"+s)
		th.HV[i] = &Hypervisor{Name: "e2e-hv-" + s, NS: "e2e-hv" + s, Dir: dir, N: i + 1,
			LocalIP: fmt.Sprintf("%s.%d", underlayNet, i+1),
			OVS:     OVS{DB: "unix:" + filepath.Join(dir, "db.sock"), RunDir: dir}}
	}
	// leftovers of an aborted run first
	th.teardown(e.T)
	e.T.Cleanup(func() { th.teardown(e.T) })
	start := time.Now()
	if err := th.up(e.Ctx); err != nil {
		e.T.Fatalf("twohost up: %v", err)
	}
	e.T.Logf("twohost: two OVS in netns %s/%s with underlay up in %s", th.HV[0].NS, th.HV[1].NS, time.Since(start).Round(time.Millisecond))
	return th
}

// AgentConfig is the agent configuration of this hypervisor.
func (h *Hypervisor) AgentConfig() AgentConfig {
	return AgentConfig{
		Host:           h.Name,
		LocalIP:        h.LocalIP,
		TunnelTypes:    "vxlan,gre,geneve",
		BridgeMappings: "none",
		Firewall:       "openvswitch",
		OVSDB:          h.OVS.DB,
		NetNS:          h.NS,
		Env:            []string{"OVS_RUNDIR=" + h.Dir},
	}
}

func (h *Hypervisor) ovsEnv() []string {
	return append(os.Environ(), "OVS_RUNDIR="+h.Dir, "OVS_LOGDIR="+h.Dir, "OVS_DBDIR="+h.Dir)
}

func (h *Hypervisor) inNS(ctx context.Context, name string, args ...string) (string, error) {
	return sh(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Appctl runs ovs-appctl against this hypervisor's ovs-vswitchd.
func (h *Hypervisor) Appctl(ctx context.Context, args ...string) (string, error) {
	return sh(ctx, "ovs-appctl", append([]string{"-t", filepath.Join(h.Dir, "ovs-vswitchd.ctl")}, args...)...)
}

func (th *TwoHost) up(ctx context.Context) error {
	for _, h := range th.HV {
		if err := h.startOVS(ctx); err != nil {
			return err
		}
	}
	a, b := th.HV[0], th.HV[1]
	if _, err := sh(ctx, "ip", "link", "add", "und-a", "netns", a.NS, "type", "veth", "peer", "name", "und-b", "netns", b.NS); err != nil {
		return err
	}
	for _, h := range th.HV {
		und := "und-" + h.Name[len(h.Name)-1:]
		steps := [][]string{
			{"ovs-vsctl", "--timeout=10", "--db=" + h.OVS.DB, "--may-exist", "add-br", "br-underlay", "--", "set", "Bridge", "br-underlay", "datapath_type=netdev"},
			// NOARP: the kernel must not answer ARP on the OVS-owned port
			{"ip", "-n", h.NS, "link", "set", und, "arp", "off", "mtu", "1500", "up"},
			{"ovs-vsctl", "--timeout=10", "--db=" + h.OVS.DB, "--may-exist", "add-port", "br-underlay", und},
			{"ip", "-n", h.NS, "addr", "replace", h.LocalIP + "/24", "dev", "br-underlay"},
			{"ip", "-n", h.NS, "link", "set", "br-underlay", "mtu", "1500", "up"},
		}
		for _, s := range steps {
			if _, err := sh(ctx, s[0], s[1:]...); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
		}
		if err := h.startRelay(); err != nil {
			return err
		}
	}
	// the underlay answers before any agent starts
	if _, err := a.inNS(ctx, "ping", "-c", "1", "-W", "5", b.LocalIP); err != nil {
		return fmt.Errorf("underlay %s -> %s: %w", a.LocalIP, b.LocalIP, err)
	}
	return nil
}

func (h *Hypervisor) startOVS(ctx context.Context) error {
	if _, err := sh(ctx, "ip", "netns", "add", h.NS); err != nil {
		return err
	}
	_, _ = h.inNS(ctx, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	if _, err := sh(ctx, "ip", "-n", h.NS, "link", "set", "lo", "up"); err != nil {
		return err
	}
	if err := os.MkdirAll(h.Dir, 0o755); err != nil {
		return err
	}
	if _, err := sh(ctx, "ovsdb-tool", "create", filepath.Join(h.Dir, "conf.db"), ovsSchemaPath); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.NS, "ovsdb-server", filepath.Join(h.Dir, "conf.db"),
		"--remote=punix:"+filepath.Join(h.Dir, "db.sock"), "--pidfile="+filepath.Join(h.Dir, "ovsdb-server.pid"),
		"--unixctl="+filepath.Join(h.Dir, "ovsdb-server.ctl"), "--log-file="+filepath.Join(h.Dir, "ovsdb-server.log"),
		"-vconsole:off", "--detach", "--no-chdir")
	cmd.Env = h.ovsEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s ovsdb-server: %w: %s", h.Name, err, out)
	}
	if _, err := h.OVS.Vsctl(ctx, "--no-wait", "init"); err != nil {
		return err
	}
	if _, err := h.OVS.Vsctl(ctx, "--no-wait", "set", "Open_vSwitch", ".", "external_ids:hostname="+h.Name, "external_ids:system-id=e2e-"+h.Name); err != nil {
		return err
	}
	return h.StartVswitchd(ctx)
}

// StartVswitchd starts ovs-vswitchd inside the hypervisor's namespace (its
// tap devices live there, and it reads that namespace's routes). It returns
// once the daemon has detached.
func (h *Hypervisor) StartVswitchd(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.NS, "ovs-vswitchd", h.OVS.DB,
		"--pidfile="+filepath.Join(h.Dir, "ovs-vswitchd.pid"), "--unixctl="+filepath.Join(h.Dir, "ovs-vswitchd.ctl"),
		"--log-file="+filepath.Join(h.Dir, "ovs-vswitchd.log"), "-vconsole:off", "--detach", "--no-chdir")
	cmd.Env = h.ovsEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s ovs-vswitchd: %w: %s", h.Name, err, out)
	}
	return nil
}

// VswitchdPid is the running ovs-vswitchd's pid (0 if none).
func (h *Hypervisor) VswitchdPid() int {
	return thOurPid(filepath.Join(h.Dir, "ovs-vswitchd.pid"), h.Dir)
}

// KillVswitchd SIGKILLs ovs-vswitchd (a crash) and waits until it is gone.
func (h *Hypervisor) KillVswitchd() error {
	pid := h.VswitchdPid()
	if pid == 0 {
		return fmt.Errorf("%s: no ovs-vswitchd running", h.Name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for i := 0; i < 100 && thPidAlive(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func (h *Hypervisor) startRelay() error {
	sock := filepath.Join(h.Dir, "amqp.sock")
	for _, argv := range [][]string{
		{"socat", "UNIX-LISTEN:" + sock + ",fork,unlink-early", "TCP:127.0.0.1:5672"},
		{"ip", "netns", "exec", h.NS, "socat", "TCP-LISTEN:5672,bind=127.0.0.1,fork,reuseaddr", "UNIX-CONNECT:" + sock},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s relay: %w", h.Name, err)
		}
		go func() { _ = cmd.Wait() }()
		h.relays = append(h.relays, cmd)
		name := "relay-host.pid"
		if argv[0] == "ip" {
			name = "relay-ns.pid"
		}
		if err := os.WriteFile(filepath.Join(h.Dir, name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			return err
		}
	}
	// wait until both ends listen
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := h.inNS(context.Background(), "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/5672")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: AMQP relay not answering: %w", h.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// thPidAlive: exists and is not a zombie (PID 1 reaps orphans slowly here).
func thPidAlive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(st)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z'
	}
	return true
}

// thOurPid reads a pid file and returns the pid if it is alive and its command
// line mentions dir (so that a stale pid file never makes us signal another
// process).
func thOurPid(pidfile, dir string) int {
	data, err := os.ReadFile(pidfile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 || !thPidAlive(pid) {
		return 0
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), dir+"/") {
		return 0
	}
	return pid
}

func thStopPid(pid int) {
	if pid == 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 50 && thPidAlive(pid); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if thPidAlive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// teardown stops what we started (by recorded pid, command line checked),
// deletes our namespaces and directory. Idempotent; also removes what an
// aborted run left. Agents are stopped by their own cleanups before this.
func (th *TwoHost) teardown(t testing.TB) {
	ctx, cancel := cleanupCtx()
	defer cancel()
	if leaked := purgeSystemManagers(ctx, t); len(leaked) > 0 {
		t.Logf("twohost: removed Manager rows of the system OVS that pointed into %s: %v", twoHostBase, leaked)
	}
	for _, h := range th.HV {
		h.stop(ctx, t, "twohost")
	}
}

// stop ends what a private hypervisor runs (relays, ovs-vswitchd, ovsdb-server: recorded
// pids whose command line names its directory), whatever is left in its namespace, then
// deletes the namespace and the directory. Idempotent.
func (h *Hypervisor) stop(ctx context.Context, t testing.TB, label string) {
	for _, c := range h.relays {
		if c.Process != nil && thPidAlive(c.Process.Pid) {
			// its own session: the group holds the per-connection forks too
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
			thStopPid(c.Process.Pid)
		}
	}
	h.relays = nil
	files, _ := filepath.Glob(filepath.Join(h.Dir, "relay-*.pid"))
	for _, f := range files {
		thStopPid(thOurPid(f, h.Dir))
	}
	if pid := h.VswitchdPid(); pid != 0 {
		// exit --cleanup removes the datapath's tap devices; SIGTERM would leave them
		_, _ = sh(ctx, "timeout", "10", "ovs-appctl", "-t", filepath.Join(h.Dir, "ovs-vswitchd.ctl"), "exit", "--cleanup")
		for i := 0; i < 50 && thPidAlive(pid); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		thStopPid(pid)
	}
	thStopPid(thOurPid(filepath.Join(h.Dir, "ovsdb-server.pid"), h.Dir))
	if out, _ := sh(ctx, "ip", "netns", "list"); thNsListed(out, h.NS) {
		// whatever still runs in our namespace was started by this suite
		if pids, _ := sh(ctx, "ip", "netns", "pids", h.NS); strings.TrimSpace(pids) != "" {
			for _, f := range strings.Fields(pids) {
				if pid, err := strconv.Atoi(f); err == nil {
					t.Logf("%s teardown: stopping leftover pid %d in netns %s", label, pid, h.NS)
					thStopPid(pid)
				}
			}
		}
		if _, err := sh(ctx, "ip", "netns", "del", h.NS); err != nil {
			t.Errorf("%s teardown: %v", label, err)
		}
	}
	_ = os.RemoveAll(h.Dir)
}

func thNsListed(list, ns string) bool {
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == ns {
			return true
		}
	}
	return false
}

// VM creates a port bound to this hypervisor on the network and plugs it
// into the hypervisor's br-int (in its namespace, on its OVS).
func (th *TwoHost) VM(h *Hypervisor, nw *Network, name string) *VM {
	th.e.T.Helper()
	p := th.e.Port(PortSpec{Name: name, NetworkID: nw.ID, HostID: h.Name})
	return th.e.Plug(PlugSpec{Port: p, MTU: nw.MTU, HostNS: h.NS, OVS: h.OVS})
}

// TunnelPorts lists the tunnel ports (vxlan-*, gre-*, geneve-*) on br-tun.
func (h *Hypervisor) TunnelPorts(ctx context.Context) ([]string, error) {
	ports, err := h.OVS.ListPorts(ctx, "br-tun")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ports {
		if strings.HasPrefix(p, "vxlan-") || strings.HasPrefix(p, "gre-") || strings.HasPrefix(p, "geneve-") {
			out = append(out, p)
		}
	}
	return out, nil
}

// WaitTunnelPort waits until br-tun has (present) or lacks (!present) the
// port and returns how long it took.
func (h *Hypervisor) WaitTunnelPort(ctx context.Context, name string, present bool, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		ports, err := h.TunnelPorts(ctx)
		if err == nil && thContains(ports, name) == present {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("%s: tunnel port %s present=%v not reached after %s (br-tun tunnel ports %v, %v)", h.Name, name, present, timeout, ports, err)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func thContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

var thVolatilRe = regexp.MustCompile(`\s*(duration|n_packets|n_bytes|idle_age|hard_age)=[^,\s]*,?`)

// FlowDump is the flows of one bridge, one line each, without statistics.
type FlowDump []string

// Flows dumps a bridge of this hypervisor.
func (h *Hypervisor) Flows(ctx context.Context, bridge string) (FlowDump, error) {
	f, err := h.OVS.DumpFlows(ctx, bridge)
	return FlowDump(f), err
}

// Cookies counts the flows per cookie, leaving out learned flows (they carry
// a hard_timeout and the cookie their learn action embeds).
func (d FlowDump) Cookies() map[string]int {
	m := map[string]int{}
	for _, l := range d {
		if strings.Contains(l, "hard_timeout=") {
			continue
		}
		c := "0x0"
		if mm := cookieRe.FindStringSubmatch(l); mm != nil {
			c = mm[1]
		}
		m[c]++
	}
	return m
}

// Normalized is the dump without cookies, statistics and learned flows,
// sorted: what must be equal before and after a restart.
func (d FlowDump) Normalized() []string {
	var out []string
	for _, l := range d {
		if strings.Contains(l, "hard_timeout=") {
			continue
		}
		l = cookieRe.ReplaceAllString(l, "")
		l = thVolatilRe.ReplaceAllString(l, "")
		out = append(out, strings.Join(strings.Fields(strings.ReplaceAll(l, ", ", " ")), " "))
	}
	sort.Strings(out)
	return out
}

// Healthz asks the agent's /healthz inside its namespace (200 = in sync).
func (h *Hypervisor) Healthz(ctx context.Context) bool {
	if h.Agent == nil || h.Agent.Config.MetricsListen == "off" {
		return false
	}
	_, err := h.inNS(ctx, "curl", "-sf", "-m", "2", "http://"+h.Agent.Config.MetricsListen+"/healthz")
	return err == nil
}

// WaitHealthy waits for /healthz to answer 200 and returns the time it took.
func (h *Hypervisor) WaitHealthy(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for !h.Healthz(ctx) {
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("%s: agent not in sync (/healthz) after %s", h.Name, timeout)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return time.Since(start), nil
}

// WaitNewStart waits until the API shows host's agent alive with a
// started_at other than before.
func (e *Env) WaitNewStart(host, before string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		ai, err := e.Neutron.OVSAgent(e.Ctx, host)
		if err == nil && ai != nil && ai.Alive && ai.StartedAt != before {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("agent %s: no new started_at within %s", host, timeout)
		}
		time.Sleep(pollEvery)
	}
}

// purgeSystemManagers removes the system OVS's Manager rows whose target
// lies under twoHostBase and returns their targets. Such a row makes the
// system ovsdb-server listen on a hypervisor's db.sock path, taking the
// path over from the hypervisor's own ovsdb-server: it appears when the
// reference agent, inside a hypervisor, adds a Manager for its
// ovsdb_connection with an ovs-vsctl that reached the system database.
func purgeSystemManagers(ctx context.Context, t testing.TB) []string {
	out, err := OVS{}.Vsctl(ctx, "--columns=_uuid,target", "--format=csv", "--no-headings", "list", "Manager")
	if err != nil {
		t.Logf("twohost: system Manager rows: %v", err)
		return nil
	}
	var gone []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, ",", 2)
		if len(f) != 2 || !strings.Contains(f[1], twoHostBase) {
			continue
		}
		if _, err := (OVS{}).Vsctl(ctx, "remove", "Open_vSwitch", ".", "manager_options", f[0]); err != nil {
			t.Errorf("twohost: remove system Manager %s: %v", f[1], err)
			continue
		}
		gone = append(gone, strings.Trim(f[1], `"`))
	}
	return gone
}
