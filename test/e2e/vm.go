//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
)

func newUUID() string { return uuid.NewString() }

// sh runs a command and returns its combined output; the error names the
// command and carries the output.
func sh(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// OVS addresses one Open vSwitch: the system one (zero value) or a private
// one (DB = unix:/tmp/.../db.sock, RunDir for the bridges' .mgmt sockets).
type OVS struct {
	DB     string
	RunDir string
}

// Vsctl runs ovs-vsctl against this OVS.
func (o OVS) Vsctl(ctx context.Context, args ...string) (string, error) {
	a := []string{"--timeout=10"}
	if o.DB != "" {
		a = append(a, "--db="+o.DB)
	}
	out, err := sh(ctx, "ovs-vsctl", append(a, args...)...)
	return strings.TrimSpace(out), err
}

// Ofctl runs ovs-ofctl -O OpenFlow13 <cmd> <bridge> [args].
func (o OVS) Ofctl(ctx context.Context, cmd, bridge string, args ...string) (string, error) {
	target := bridge
	if o.RunDir != "" {
		target = "unix:" + o.RunDir + "/" + bridge + ".mgmt"
	}
	return sh(ctx, "ovs-ofctl", append([]string{"-O", "OpenFlow13", cmd, target}, args...)...)
}

// DumpFlows returns the flows of bridge without statistics.
func (o OVS) DumpFlows(ctx context.Context, bridge string) ([]string, error) {
	out, err := o.Ofctl(ctx, "dump-flows", bridge, "--no-stats")
	if err != nil {
		return nil, err
	}
	var flows []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "OFPST_FLOW") {
			flows = append(flows, l)
		}
	}
	return flows, nil
}

// BridgeExists reports whether the bridge exists.
func (o OVS) BridgeExists(ctx context.Context, bridge string) bool {
	_, err := o.Vsctl(ctx, "br-exists", bridge)
	return err == nil
}

// PortTag returns the VLAN tag of a port (0 when none).
func (o OVS) PortTag(ctx context.Context, port string) (int, error) {
	out, err := o.Vsctl(ctx, "get", "Port", port, "tag")
	if err != nil {
		return 0, err
	}
	if out == "[]" {
		return 0, nil
	}
	return strconv.Atoi(out)
}

// InterfaceOfport returns the interface's OpenFlow port number (-1 or 0 while unassigned).
func (o OVS) InterfaceOfport(ctx context.Context, iface string) (int, error) {
	out, err := o.Vsctl(ctx, "get", "Interface", iface, "ofport")
	if err != nil {
		return 0, err
	}
	if out == "[]" {
		return 0, nil
	}
	return strconv.Atoi(out)
}

// ListPorts lists the ports of bridge.
func (o OVS) ListPorts(ctx context.Context, bridge string) ([]string, error) {
	out, err := o.Vsctl(ctx, "list-ports", bridge)
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Fields(out), nil
}

// VM is a "virtual machine": a network namespace whose eth0 is a veth peer
// of tap<port-id[:11]> on the integration bridge, plugged as nova/os-vif
// plugs an OVS VIF.
type VM struct {
	NS        string // netns vm-<port-id[:8]>
	Port      *Port
	Tap       string
	MAC       string
	IP        string
	PrefixLen int
	Bridge    string
	HostNS    string // netns of the hypervisor holding the tap ("" = root)
	OVS       OVS
}

// PlugSpec says where and how to plug a port.
type PlugSpec struct {
	Port      *Port
	PrefixLen int    // default 24
	MTU       int    // default: the network's MTU as the caller passes it, else 1450
	Bridge    string // default br-int
	HostNS    string // hypervisor netns for twohost setups ("" = root)
	OVS       OVS
	// EnsureBridge creates the bridge (datapath_type=netdev) when missing, as
	// os-vif does; Unplug does not remove it.
	EnsureBridge bool
}

func (v *VM) ipHost(ctx context.Context, args ...string) (string, error) {
	if v.HostNS != "" {
		args = append([]string{"-n", v.HostNS}, args...)
	}
	return sh(ctx, "ip", args...)
}

// Exec runs a command inside the VM's namespace.
func (v *VM) Exec(ctx context.Context, name string, args ...string) (string, error) {
	return sh(ctx, "ip", append([]string{"netns", "exec", v.NS, name}, args...)...)
}

// PlugVM creates the namespace and veth, sets MAC/IP from the port, turns tx
// checksum offload off (the netdev datapath never completes it, so TCP would
// fail), and adds the tap to the bridge with the external_ids os-vif writes.
func PlugVM(ctx context.Context, s PlugSpec) (*VM, error) {
	p := s.Port
	if p == nil || len(p.ID) < 11 {
		return nil, fmt.Errorf("plug: no port")
	}
	v := &VM{
		NS: "vm-" + p.ID[:8], Port: p, Tap: "tap" + p.ID[:11], MAC: p.MACAddress, IP: p.IP(),
		PrefixLen: s.PrefixLen, Bridge: s.Bridge, HostNS: s.HostNS, OVS: s.OVS,
	}
	if v.PrefixLen == 0 {
		v.PrefixLen = 24
	}
	if v.Bridge == "" {
		v.Bridge = "br-int"
	}
	mtu := s.MTU
	if mtu == 0 {
		mtu = 1450
	}
	if s.EnsureBridge && !v.OVS.BridgeExists(ctx, v.Bridge) {
		if _, err := v.OVS.Vsctl(ctx, "--may-exist", "add-br", v.Bridge, "--", "set", "Bridge", v.Bridge, "datapath_type=netdev"); err != nil {
			return nil, err
		}
	}
	peer := "v" + p.ID[:11]
	m := strconv.Itoa(mtu)
	if _, err := sh(ctx, "ip", "netns", "add", v.NS); err != nil {
		return v, err
	}
	_, _ = v.ipHost(ctx, "link", "del", v.Tap) // a leftover of an earlier run
	if _, err := v.ipHost(ctx, "link", "add", v.Tap, "mtu", m, "type", "veth", "peer", "name", peer, "mtu", m); err != nil {
		return v, err
	}
	if _, err := v.ipHost(ctx, "link", "set", peer, "netns", v.NS); err != nil {
		return v, err
	}
	inNS := [][]string{
		{"ip", "link", "set", peer, "name", "eth0"},
		{"ip", "link", "set", "eth0", "address", v.MAC},
		{"ip", "link", "set", "lo", "up"},
	}
	if v.IP != "" {
		inNS = append(inNS, []string{"ip", "addr", "add", v.IP + "/" + strconv.Itoa(v.PrefixLen), "dev", "eth0"})
	}
	inNS = append(inNS, []string{"ip", "link", "set", "eth0", "up"}, []string{"ethtool", "-K", "eth0", "tx", "off"})
	for _, st := range inNS {
		if _, err := v.Exec(ctx, st[0], st[1:]...); err != nil {
			return v, err
		}
	}
	// IPv6 off keeps router solicitations and MLD out of counters and captures.
	_, _ = v.Exec(ctx, "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1")
	ethtool := []string{"ethtool", "-K", v.Tap, "tx", "off"}
	if v.HostNS != "" {
		ethtool = append([]string{"ip", "netns", "exec", v.HostNS}, ethtool...)
	}
	if _, err := sh(ctx, ethtool[0], ethtool[1:]...); err != nil {
		return v, err
	}
	if _, err := v.ipHost(ctx, "link", "set", v.Tap, "up"); err != nil {
		return v, err
	}
	// --may-exist makes the add idempotent, so a connection the server dropped is retried:
	// the Zed reference agent adds a Manager on ovsdb-server's own socket path at its start,
	// and ovsdb-server dropped a client mid-request then ("send error: Broken pipe", seen in
	// TestTakeoverFromReference plugging 20 ports at once).
	var err error
	for try := 0; try < 3; try++ {
		_, err = v.OVS.Vsctl(ctx, "--", "--may-exist", "add-port", v.Bridge, v.Tap, "--", "set", "Interface", v.Tap,
			"external_ids:iface-id="+p.ID, "external_ids:attached-mac="+v.MAC,
			"external_ids:iface-status=active", "external_ids:vm-uuid="+p.DeviceID)
		if err == nil || !transientOVSDBError(err) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	return v, err
}

// transientOVSDBError: the client lost its connection to ovsdb-server (not a refused request).
func transientOVSDBError(err error) bool {
	m := err.Error()
	return strings.Contains(m, "Broken pipe") || strings.Contains(m, "Connection reset") || strings.Contains(m, "connection dropped")
}

// Unplug removes the tap from OVS, the veth and the namespace; it ignores
// what is already gone.
func (v *VM) Unplug(ctx context.Context) error {
	var errs []string
	if _, err := v.OVS.Vsctl(ctx, "--if-exists", "del-port", v.Bridge, v.Tap); err != nil {
		errs = append(errs, err.Error())
	}
	_, _ = v.ipHost(ctx, "link", "del", v.Tap)
	if out, err := sh(ctx, "ip", "netns", "del", v.NS); err != nil && !strings.Contains(out, "No such file") {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("unplug %s: %s", v.NS, strings.Join(errs, "; "))
	}
	return nil
}

// PingStats is what ping printed at the end.
type PingStats struct {
	Sent, Received int
	Output         string
}

// Lost is Sent-Received.
func (s PingStats) Lost() int { return s.Sent - s.Received }

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received`)

func parsePing(out string) PingStats {
	s := PingStats{Output: out}
	if m := pingSummary.FindStringSubmatch(out); m != nil {
		s.Sent, _ = strconv.Atoi(m[1])
		s.Received, _ = strconv.Atoi(m[2])
	}
	return s
}

// Ping sends count echo requests 0.1 s apart to ip and reports how many came
// back; an error only when ping could not run at all.
func (v *VM) Ping(ctx context.Context, ip string, count int) (PingStats, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", v.NS, "ping", "-n", "-q",
		"-c", strconv.Itoa(count), "-i", "0.1", "-W", "1", ip).CombinedOutput()
	s := parsePing(string(out))
	if s.Sent == 0 && err != nil {
		return s, fmt.Errorf("ping from %s to %s: %w: %s", v.NS, ip, err, out)
	}
	return s, nil
}

// PingUntil pings once every 0.1 s until a reply comes or timeout passes.
func (v *VM) PingUntil(ctx context.Context, ip string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	for time.Now().Before(deadline) {
		s, err := v.Ping(ctx, ip, 1)
		if err != nil {
			return 0, err
		}
		if s.Received == 1 {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("no ping reply from %s to %s within %s", v.NS, ip, timeout)
}

// Pinger is a ping running in the background (-i 0.1), to count what a
// restart or an update costs. It is a TimedPinger reporting counts only, so
// that the echo still in flight when ping is interrupted counts neither
// sent nor lost (with "ping -q" it counted as lost: one in a few runs of a
// zero-loss test failed on it).
type Pinger struct{ tp *TimedPinger }

// StartPing starts "ping -i 0.1 ip" in the VM.
func (v *VM) StartPing(ip string) (*Pinger, error) {
	tp, err := v.StartTimedPing(ip)
	if err != nil {
		return nil, err
	}
	return &Pinger{tp: tp}, nil
}

// Stop interrupts ping and returns the counts.
func (p *Pinger) Stop() PingStats { return p.tp.Stop().PingStats }

// TCPServer is a socat echo server inside a VM.
type TCPServer struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// ServeTCPEcho listens on the VM's address and port and echoes every line.
func (v *VM) ServeTCPEcho(port int) (*TCPServer, error) {
	cmd := exec.Command("ip", "netns", "exec", v.NS, "socat",
		fmt.Sprintf("TCP-LISTEN:%d,bind=%s,fork,reuseaddr", port, v.IP), "EXEC:cat")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &TCPServer{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	return s, nil
}

// Stop ends the server and the children it forked (its own process group).
func (s *TCPServer) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// TCPEcho connects from the VM to ip:port, sends a line and expects it back.
func (v *VM) TCPEcho(ctx context.Context, ip string, port int) error {
	msg := "ovsagent-" + newUUID()[:8]
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", v.NS, "socat", "-T", "3", "-",
		fmt.Sprintf("TCP:%s:%d,connect-timeout=3", ip, port))
	cmd.Stdin = strings.NewReader(msg + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("tcp %s -> %s:%d: %w: %s", v.NS, ip, port, err, strings.TrimSpace(string(out)))
	}
	if strings.TrimSpace(string(out)) != msg {
		return fmt.Errorf("tcp %s -> %s:%d: got %q, want %q", v.NS, ip, port, out, msg)
	}
	return nil
}
