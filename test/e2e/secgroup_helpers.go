//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Helpers of the security-group scenarios (secgroup_test.go): VMs at fixed
// addresses, open groups, eventual/consistent reachability checks, a TCP
// session held open, UDP probes, and the system ovs-vswitchd restart.

// sgConverge is how long a change pushed by the server may take to reach the
// dataplane on the loaded test machine before a check gives up.
const sgConverge = 30 * time.Second

// sgVmAt creates a port with a fixed IP (and whatever mod sets) and plugs it.
func (e *Env) sgVmAt(nw *Network, name, ip string, mod func(*PortSpec)) *VM {
	e.T.Helper()
	s := PortSpec{Name: name, NetworkID: nw.ID}
	if ip != "" {
		s.FixedIPs = []FixedIP{{IPAddress: ip}}
	}
	if mod != nil {
		mod(&s)
	}
	return e.Plug(PlugSpec{Port: e.Port(s), MTU: nw.MTU})
}

// sgOpenGroup is a group that lets every IPv4 packet in (and, by neutron's
// defaults, everything out), so that only anti-spoofing filters a sender.
func (e *Env) sgOpenGroup(name string) *SecurityGroup {
	e.T.Helper()
	sg := e.SecurityGroup(name)
	e.Rule(RuleSpec{SecurityGroupID: sg.ID, RemoteIPPrefix: "0.0.0.0/0"})
	return sg
}

// sgWaitActive waits until every VM's port is ACTIVE and logs how long it took.
func (e *Env) sgWaitActive(vms ...*VM) {
	e.T.Helper()
	for _, vm := range vms {
		e.T.Logf("%s (%s) ACTIVE after %s", vm.NS, vm.IP, e.WaitStatus(vm.Port, "ACTIVE", 60*time.Second))
	}
}

// sgEventually retries f every 200 ms until it returns nil or timeout passes;
// it returns how long that took, failing the test with f's last error.
func sgEventually(t testing.TB, timeout time.Duration, what string, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < timeout {
		if err = f(); err == nil {
			t.Logf("%s: after %s", what, time.Since(start).Round(time.Millisecond))
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("%s: not within %s: %v", what, timeout, err)
	return timeout
}

// sgPingOK is nil when at least one of n pings is answered.
func sgPingOK(ctx context.Context, from *VM, ip string, n int) error {
	st, err := from.Ping(ctx, ip, n)
	if err != nil {
		return err
	}
	if st.Received == 0 {
		return fmt.Errorf("ping %s -> %s: 0/%d answered", from.NS, ip, st.Sent)
	}
	return nil
}

// sgPingBlocked is nil when none of n pings is answered.
func sgPingBlocked(ctx context.Context, from *VM, ip string, n int) error {
	st, err := from.Ping(ctx, ip, n)
	if err != nil {
		return err
	}
	if st.Received != 0 {
		return fmt.Errorf("ping %s -> %s: %d/%d answered, want none", from.NS, ip, st.Received, st.Sent)
	}
	return nil
}

// sgTcpBlocked is nil when a TCP echo to ip:port fails.
func sgTcpBlocked(ctx context.Context, from *VM, ip string, port int) error {
	if err := from.TCPEcho(ctx, ip, port); err == nil {
		return fmt.Errorf("tcp %s -> %s:%d answered, want blocked", from.NS, ip, port)
	}
	return nil
}

// sgServe starts a TCP echo server and stops it at cleanup.
func sgServe(t testing.TB, vm *VM, port int) {
	t.Helper()
	srv, err := vm.ServeTCPEcho(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
}

// sgNeigh sets a permanent neighbour entry in the VM (ip -> mac on eth0), so
// that a probe depends on the IP packet alone, not on ARP.
func sgNeigh(ctx context.Context, vm *VM, ip, mac string) error {
	_, err := vm.Exec(ctx, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", "eth0", "nud", "permanent")
	return err
}

// SGSession is one TCP connection held open by socat in a VM: each Echo
// writes a line and waits for the echo server to send it back.
type SGSession struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
	n     int
}

// OpenTCP connects from the VM to ip:port and keeps the connection open.
func (v *VM) OpenTCP(ctx context.Context, ip string, port int) (*SGSession, error) {
	cmd := exec.Command("ip", "netns", "exec", v.NS, "socat", "-", fmt.Sprintf("TCP:%s:%d,connect-timeout=5", ip, port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &SGSession{cmd: cmd, stdin: in, lines: make(chan string, 64), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	if err := s.Echo(10 * time.Second); err != nil {
		s.Close()
		return nil, fmt.Errorf("open tcp %s -> %s:%d: %w", v.NS, ip, port, err)
	}
	return s, nil
}

// Echo sends one line and waits up to timeout for it to come back.
func (s *SGSession) Echo(timeout time.Duration) error {
	s.n++
	msg := fmt.Sprintf("line-%d-%s", s.n, newUUID()[:8])
	if _, err := io.WriteString(s.stdin, msg+"\n"); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return fmt.Errorf("connection closed before %q came back", msg)
			}
			if l == msg {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("%q not echoed within %s", msg, timeout)
		}
	}
}

// Alive reports whether socat still runs (the connection was not reset).
func (s *SGSession) Alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Close ends socat (its own process group).
func (s *SGSession) Close() {
	_ = s.stdin.Close()
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// SGUDPSink receives UDP datagrams on a port in a VM and keeps what arrived.
type SGUDPSink struct {
	cmd  *exec.Cmd
	out  *sgLockedBuf
	done chan struct{}
}

// ListenUDP starts "socat -u UDP-RECVFROM:port,fork STDOUT" in the VM.
func (v *VM) ListenUDP(port int) (*SGUDPSink, error) {
	cmd := exec.Command("ip", "netns", "exec", v.NS, "socat", "-u",
		fmt.Sprintf("UDP-RECVFROM:%d,fork,reuseaddr", port), "STDOUT")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	buf := &sgLockedBuf{}
	cmd.Stdout = buf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &SGUDPSink{cmd: cmd, out: buf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	return s, nil
}

// Got reports whether msg arrived.
func (s *SGUDPSink) Got(msg string) bool { return strings.Contains(s.out.String(), msg) }

// Stop ends the listener.
func (s *SGUDPSink) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// SendUDP sends one datagram from the VM's sport to ip:dport.
func (v *VM) SendUDP(ctx context.Context, ip string, dport, sport int, msg string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", v.NS, "socat", "-u", "-",
		fmt.Sprintf("UDP-SENDTO:%s:%d,sourceport=%d,reuseaddr,broadcast", ip, dport, sport))
	cmd.Stdin = strings.NewReader(msg + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("udp %s :%d -> %s:%d: %w: %s", v.NS, sport, ip, dport, err, out)
	}
	return nil
}

// sgUdpArrives sends msg (a few times) and reports whether the sink got it.
func sgUdpArrives(ctx context.Context, from *VM, sink *SGUDPSink, ip string, dport, sport int, msg string) (bool, error) {
	for i := 0; i < 3; i++ {
		if err := from.SendUDP(ctx, ip, dport, sport, msg); err != nil {
			return false, err
		}
		time.Sleep(300 * time.Millisecond)
		if sink.Got(msg) {
			return true, nil
		}
	}
	return false, nil
}

// sgArpReplies runs "arping -c n" for ip from the VM and returns the replies.
func sgArpReplies(ctx context.Context, from *VM, ip string, n int) (int, error) {
	out, _ := from.Exec(ctx, "arping", "-c", strconv.Itoa(n), "-w", strconv.Itoa(n+1), "-I", "eth0", ip)
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Received" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("arping %s from %s: no summary: %s", ip, from.NS, out)
}

// sgVswitchdCtl is the unixctl socket of the system ovs-vswitchd.
func sgVswitchdCtl() (string, error) {
	data, err := os.ReadFile("/var/run/openvswitch/ovs-vswitchd.pid")
	if err != nil {
		return "", err
	}
	pid := strings.TrimSpace(string(data))
	return filepath.Join("/var/run/openvswitch", "ovs-vswitchd."+pid+".ctl"), nil
}

// sgRestartSystemVswitchd restarts the system ovs-vswitchd the way the
// distribution's service does (ovs-ctl restart: flows saved, vswitchd
// stopped and started with flow-restore-wait, flows restored), leaving
// ovsdb-server alone. It returns how long the restart took.
func sgRestartSystemVswitchd(ctx context.Context) (time.Duration, string, error) {
	start := time.Now()
	out, err := sh(ctx, "/usr/share/openvswitch/scripts/ovs-ctl", "--no-ovsdb-server", "--system-id=random", "restart")
	return time.Since(start), out, err
}

type sgLockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *sgLockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *sgLockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sgFlowWatch logs br-int's flow count whenever it changes (every 200 ms)
// until stop is closed: what a restart does to the installed flows.
func sgFlowWatch(t testing.TB, e *Env, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		start, last := time.Now(), ""
		for {
			out, err := e.OVS.Ofctl(context.Background(), "dump-aggregate", "br-int")
			cur := strings.TrimSpace(out)
			if err != nil {
				cur = "error: " + err.Error()
			} else if i := strings.Index(cur, "flow_count="); i >= 0 {
				cur = cur[i:]
			}
			if cur != last {
				t.Logf("br-int at +%s: %s", time.Since(start).Round(time.Millisecond), cur)
				last = cur
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return done
}
