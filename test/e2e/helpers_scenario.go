//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// Helpers of the scenario and restart suites (scenario_test.go,
// restart_test.go): provider networks, a "physical switch" namespace on a
// physical bridge, timed pings, port status watching, flow dumps without
// cookies, and the system ovs-vswitchd restart.

// ProviderVLANNetwork creates a VLAN network on physnet, preferring
// segmentation id want and taking the next free one in 100:200 when it is
// taken (refenv's network_vlan_ranges = physnet1:100:200).
func (e *Env) ProviderVLANNetwork(name, physnet string, want int) *Network {
	e.T.Helper()
	var lastErr error
	for i := 0; i <= 100; i++ {
		seg := 100 + (want-100+i)%101
		nw, err := e.Neutron.CreateNetwork(e.Ctx, NetworkSpec{Name: e.name(name), NetworkType: "vlan", PhysicalNetwork: physnet, SegmentationID: seg})
		if err != nil {
			lastErr = err
			if ae, ok := err.(*APIError); ok && ae.Status == http.StatusConflict {
				continue
			}
			e.T.Fatalf("create vlan network: %v", err)
		}
		e.T.Cleanup(func() {
			ctx, cancel := cleanupCtx()
			defer cancel()
			if err := e.Neutron.DeleteNetwork(ctx, nw.ID); err != nil && !IsNotFound(err) {
				e.T.Errorf("cleanup: %v", err)
			}
		})
		return nw
	}
	e.T.Fatalf("no free VLAN on %s in 100:200: %v", physnet, lastErr)
	return nil
}

// PhysSwitch is the "physical switch" behind a physical bridge. The kernel
// here has no 802.1Q support (no VLAN subinterfaces, no tc vlan action), so
// the switch is an OVS bridge of its own (standalone: a learning switch)
// joined to the physical bridge by a veth pair, the "wire": tcpdump on the
// wire sees the frames exactly as they leave the physical bridge. Hosts
// answering on the switch are namespaces on access ports (a VLAN) or on a
// trunk port (untagged frames).
type PhysSwitch struct {
	Bridge   string // the agent's physical bridge (br-phys)
	SwBridge string // the switch
	Wire     string // the switch's end of the wire (capture here)
	wirePhys string // the physical bridge's end
	hosts    []string
	o        OVS
}

// NewPhysSwitch builds the switch behind bridge (removed at cleanup). The
// names are fixed: e2e runs are serialised by the harness lock, and a
// leftover of an aborted run is removed first.
func (e *Env) NewPhysSwitch(bridge string) *PhysSwitch {
	e.T.Helper()
	s := &PhysSwitch{Bridge: bridge, SwBridge: "br-e2esw", Wire: "e2e-physw1", wirePhys: "e2e-physw0", o: e.OVS}
	s.remove(e.Ctx)
	e.T.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		s.remove(ctx)
	})
	steps := [][]string{
		{"ip", "link", "add", s.wirePhys, "type", "veth", "peer", "name", s.Wire},
		{"ethtool", "-K", s.wirePhys, "tx", "off"},
		{"ethtool", "-K", s.Wire, "tx", "off"},
		{"ip", "link", "set", s.wirePhys, "up"},
		{"ip", "link", "set", s.Wire, "up"},
	}
	for _, st := range steps {
		if _, err := sh(e.Ctx, st[0], st[1:]...); err != nil {
			e.T.Fatalf("phys switch: %v", err)
		}
	}
	if _, err := e.OVS.Vsctl(e.Ctx, "add-br", s.SwBridge, "--", "set", "Bridge", s.SwBridge, "datapath_type=netdev", "fail_mode=standalone",
		"--", "add-port", s.SwBridge, s.Wire); err != nil {
		e.T.Fatalf("phys switch: %v", err)
	}
	if _, err := e.OVS.Vsctl(e.Ctx, "--may-exist", "add-port", bridge, s.wirePhys); err != nil {
		e.T.Fatalf("phys switch: %v", err)
	}
	return s
}

func (s *PhysSwitch) remove(ctx context.Context) {
	_, _ = s.o.Vsctl(ctx, "--if-exists", "del-port", s.Bridge, s.wirePhys)
	_, _ = s.o.Vsctl(ctx, "--if-exists", "del-br", s.SwBridge)
	_, _ = sh(ctx, "ip", "link", "del", s.wirePhys)
	for _, h := range s.hosts {
		_, _ = sh(ctx, "ip", "link", "del", h)
		_, _ = sh(ctx, "ip", "netns", "del", h)
	}
	// leftovers of an aborted run
	if out, err := sh(ctx, "ip", "netns", "list"); err == nil {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "e2e-sw") {
				_, _ = sh(ctx, "ip", "link", "del", f[0])
				_, _ = sh(ctx, "ip", "netns", "del", f[0])
			}
		}
	}
}

// AddHost adds a host answering for cidr (ip/prefix) on VLAN vid (an access
// port) or untagged (vid 0: a port without tag, which gets the untagged
// frames untagged).
func (s *PhysSwitch) AddHost(ctx context.Context, vid int, cidr string) error {
	name := fmt.Sprintf("e2e-sw%d", vid) // netns and the port on the switch
	s.hosts = append(s.hosts, name)
	steps := [][]string{
		{"ip", "netns", "add", name},
		{"ip", "link", "add", name, "type", "veth", "peer", "name", name + "p"},
		{"ip", "link", "set", name + "p", "netns", name},
		{"ip", "netns", "exec", name, "ip", "link", "set", name + "p", "name", "eth0"},
		{"ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"},
		{"ip", "netns", "exec", name, "ip", "link", "set", "eth0", "up"},
		{"ip", "netns", "exec", name, "ethtool", "-K", "eth0", "tx", "off"},
		{"ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"},
		{"ip", "netns", "exec", name, "ip", "addr", "add", cidr, "dev", "eth0"},
		{"ethtool", "-K", name, "tx", "off"},
		{"ip", "link", "set", name, "up"},
	}
	for _, st := range steps {
		if _, err := sh(ctx, st[0], st[1:]...); err != nil {
			return fmt.Errorf("switch host %s: %w", name, err)
		}
	}
	args := []string{"add-port", s.SwBridge, name}
	if vid != 0 {
		args = append(args, "tag="+strconv.Itoa(vid))
	}
	_, err := s.o.Vsctl(ctx, args...)
	return err
}

// Capture runs "tcpdump -e -n" on the wire with filter while fn runs, and
// returns the frames it printed (one per line).
func (s *PhysSwitch) Capture(ctx context.Context, filter string, fn func()) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := append([]string{"-e", "-n", "-l", "-i", s.Wire}, strings.Fields(filter)...)
	cmd := exec.CommandContext(cctx, "tcpdump", args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// tcpdump says "listening on" on stderr once the capture is open.
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				once.Do(func() { close(ready) })
			}
		}
		once.Do(func() { close(ready) })
	}()
	var mu sync.Mutex
	var lines []string
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
		close(done)
	}()
	select {
	case <-ready:
	case <-cctx.Done():
	}
	time.Sleep(200 * time.Millisecond)
	fn()
	time.Sleep(500 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	_ = cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	return lines, nil
}

// TimedPinger runs "ping -D -O -i 0.1" and keeps every reply's time, so that
// an outage can be measured (the longest gap between replies) and not only
// counted.
type TimedPinger struct {
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex
	replies []pingReply
	out     strings.Builder
}

type pingReply struct {
	seq int
	at  time.Time
}

var pingReplyLine = regexp.MustCompile(`^\[(\d+)\.(\d+)\] \d+ bytes from .*icmp_seq=(\d+)`)

// StartTimedPing starts the pinger in the VM.
func (v *VM) StartTimedPing(ip string) (*TimedPinger, error) {
	cmd := exec.Command("ip", "netns", "exec", v.NS, "ping", "-n", "-D", "-O", "-i", "0.1", "-W", "1", ip)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &TimedPinger{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			p.mu.Lock()
			p.out.WriteString(l + "\n")
			if m := pingReplyLine.FindStringSubmatch(l); m != nil {
				sec, _ := strconv.ParseInt(m[1], 10, 64)
				frac := m[2]
				for len(frac) < 9 {
					frac += "0"
				}
				nsec, _ := strconv.ParseInt(frac[:9], 10, 64)
				seq, _ := strconv.Atoi(m[3])
				p.replies = append(p.replies, pingReply{seq: seq, at: time.Unix(sec, nsec)})
			}
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PingReport summarises a TimedPinger run.
type PingReport struct {
	PingStats
	MaxGap      time.Duration // longest time between two consecutive replies
	MaxGapAfter time.Time     // the reply that ended the longest gap
	LastBefore  time.Time     // last reply before the gap
	Missing     []int         // icmp_seq numbers sent and never answered
}

// FirstReplyAfter is the time of the first reply after t (zero if none).
func (p *TimedPinger) FirstReplyAfter(t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.replies {
		if r.at.After(t) {
			return r.at
		}
	}
	return time.Time{}
}

// Replies is the number of replies so far.
func (p *TimedPinger) Replies() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.replies)
}

// Stop interrupts ping and returns the counts and the longest gap.
func (p *TimedPinger) Stop() PingReport {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := PingReport{PingStats: parsePing(p.out.String())}
	got := map[int]bool{}
	for _, rep := range p.replies {
		got[rep.seq] = true
	}
	for seq := 1; seq <= r.Sent; seq++ {
		if !got[seq] {
			r.Missing = append(r.Missing, seq)
		}
	}
	// The echo sent just before the interrupt may still be on its way
	// (ping counts it transmitted, and lost): it was never given the
	// chance to come back, so it counts neither way. A real outage at the
	// end still shows in the echoes before it.
	if n := len(r.Missing); n > 0 && r.Missing[n-1] == r.Sent {
		r.Sent--
		r.Missing = r.Missing[:n-1]
	}
	for i := 1; i < len(p.replies); i++ {
		if g := p.replies[i].at.Sub(p.replies[i-1].at); g > r.MaxGap {
			r.MaxGap, r.MaxGapAfter, r.LastBefore = g, p.replies[i].at, p.replies[i-1].at
		}
	}
	return r
}

// PingPath is one ping of a PingSet: from a VM to an address, named in the reports.
type PingPath struct {
	Name string
	From *VM
	To   string
}

// PingSet is a TimedPinger per path, started and stopped together: what a restart or a
// takeover must not interrupt.
type PingSet struct {
	paths []PingPath
	p     []*TimedPinger
}

// StartPings starts a TimedPinger on each path.
func StartPings(t testing.TB, paths ...PingPath) *PingSet {
	t.Helper()
	ps := &PingSet{}
	for _, x := range paths {
		p, err := x.From.StartTimedPing(x.To)
		if err != nil {
			t.Fatal(err)
		}
		ps.paths, ps.p = append(ps.paths, x), append(ps.p, p)
	}
	return ps
}

// Stop stops every pinger, logs each path's counts and longest gap, and fails a path
// that lost an echo or sent fewer than minSent.
func (ps *PingSet) Stop(t testing.TB, what string, minSent int) []PingReport {
	t.Helper()
	var out []PingReport
	for i, p := range ps.p {
		r := p.Stop()
		out = append(out, r)
		t.Logf("%s: ping -i 0.1 from %s: %d sent, %d lost, longest gap %s", what, ps.paths[i].Name, r.Sent, r.Lost(), r.MaxGap.Round(time.Millisecond))
		if r.Sent < minSent || r.Lost() != 0 {
			t.Errorf("%s: ping from %s: %d sent, %d lost (icmp_seq %v)", what, ps.paths[i].Name, r.Sent, r.Lost(), r.Missing)
		}
	}
	return out
}

// StatusWatch polls ports' status (neutron has no watch), one API list of them per poll,
// and records every status other than ACTIVE it sees.
type StatusWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	polls  int
	errs   int
	flaps  []string
}

// WatchStatus starts polling the ports every 100 ms.
func (e *Env) WatchStatus(ports ...*Port) *StatusWatch { return e.watchStatusEvery(pollEvery, ports) }

// watchStatusEvery starts polling the ports every interval.
func (e *Env) watchStatusEvery(every time.Duration, ports []*Port) *StatusWatch {
	ctx, cancel := context.WithCancel(e.Ctx)
	w := &StatusWatch{cancel: cancel, done: make(chan struct{})}
	ids := map[string]bool{}
	for _, p := range ports {
		ids[p.ID] = true
	}
	// Every port's id and status, filtered here: an id filter of a hundred ports would
	// exceed the API server's request line (uwsgi's 4 KB buffer).
	q := url.Values{"fields": {"id", "status"}}
	go func() {
		defer close(w.done)
		for {
			ps, err := e.Neutron.ListPorts(ctx, q)
			w.mu.Lock()
			w.polls++
			if err != nil {
				if ctx.Err() == nil {
					w.errs++
				}
			} else {
				for _, p := range ps {
					if ids[p.ID] && p.Status != "ACTIVE" {
						w.flaps = append(w.flaps, fmt.Sprintf("%s %s at %s", p.ID[:8], p.Status, time.Now().UTC().Format("15:04:05.000")))
					}
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
			}
		}
	}()
	return w
}

// Stop ends the polling; it returns how many polls were made, how many failed
// and every non-ACTIVE status seen.
func (w *StatusWatch) Stop() (polls, errs int, flaps []string) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, w.errs, w.flaps
}

var cookieField = regexp.MustCompile(`cookie=(0x[0-9a-f]+),?\s*`)

// FlowSet returns the bridge's flows without statistics and without their
// cookie, sorted: what two runs of the agent must agree on.
func (o OVS) FlowSet(ctx context.Context, bridge string) ([]string, error) {
	flows, err := o.DumpFlows(ctx, bridge)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(flows))
	for _, f := range flows {
		f = cookieField.ReplaceAllString(f, "")
		out = append(out, strings.TrimSpace(f))
	}
	sort.Strings(out)
	return out, nil
}

// cookieRe is a flow's cookie (the first cookie= of a dump line: a learn action's comes after).
var cookieRe = regexp.MustCompile(`cookie=(0x[0-9a-f]+)`)

// flowCookies counts the flows of each cookie on the bridges.
func flowCookies(ctx context.Context, o OVS, bridges ...string) (map[string]int, error) {
	out := map[string]int{}
	for _, br := range bridges {
		fs, err := o.DumpFlows(ctx, br)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			c := "0x0"
			if m := cookieRe.FindStringSubmatch(f); m != nil {
				c = m[1]
			}
			out[c]++
		}
	}
	return out, nil
}

// diffSets lists what a has that b lacks ("-") and what b has that a lacks ("+"), sorted.
func diffSets(a, b []string) []string {
	onlyA, onlyB := ovsdump.Diff(a, b)
	var d []string
	for _, x := range onlyA {
		d = append(d, "- "+x)
	}
	for _, x := range onlyB {
		d = append(d, "+ "+x)
	}
	sort.Strings(d)
	return d
}

var bridgeCookieLine = regexp.MustCompile(`\[-\] openflow: bridge connected bridge=(\S+) cookie=(0x[0-9a-f]+)`)

// Cookies returns the cookie of each bridge the agent's last run announced
// in its log ("openflow: bridge connected").
func (a *Agent) Cookies() map[string]string {
	c := map[string]string{}
	for _, l := range strings.Split(a.Log(), "\n") {
		if m := bridgeCookieLine.FindStringSubmatch(l); m != nil {
			c[m[1]] = m[2]
		}
	}
	return c
}

// Healthz returns the status code of the agent's /healthz.
func (a *Agent) Healthz(ctx context.Context) (int, error) {
	if a.Config.MetricsListen == "off" {
		return 0, fmt.Errorf("metrics are off")
	}
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+a.Config.MetricsListen+"/healthz", nil)
	if err != nil {
		return 0, err
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// WaitFor polls cond every 100 ms until it returns nil or timeout passes; it
// returns the time taken and the last error.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), err
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// Vswitchd is the system ovs-vswitchd as started by ovs-ctl (with --monitor).
const vswitchdPidfile = "/var/run/openvswitch/ovs-vswitchd.pid"

// VswitchdPid returns the running system ovs-vswitchd's pid, checked
// against /proc/PID/cmdline.
func VswitchdPid() (int, error) {
	pid, ok := alivePid(vswitchdPidfile, "ovs-vswitchd")
	if !ok {
		return 0, fmt.Errorf("ovs-vswitchd from %s is not running (pid %d)", vswitchdPidfile, pid)
	}
	return pid, nil
}

// KillStartVswitchd kills the system ovs-vswitchd with SIGKILL (its
// --monitor parent does not restart a SIGKILLed child and exits) and starts
// it again with ovs-ctl (ovsdb-server untouched, no saved flows restored:
// the bridges come back empty and the agent has to restore them). It
// returns the old and new pids and when the new one was started.
func KillStartVswitchd(ctx context.Context) (oldPid, newPid int, killedAt, startedAt time.Time, err error) {
	oldPid, err = VswitchdPid()
	if err != nil {
		return
	}
	monitor := parentPid(oldPid)
	killedAt = time.Now()
	if err = syscall.Kill(oldPid, syscall.SIGKILL); err != nil {
		return
	}
	for i := 0; i < 50 && pidAlive(oldPid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	// The monitor exits when its child dies of SIGKILL; wait for it so that
	// ovs-ctl does not race it.
	if monitor > 1 && cmdlineHas(monitor, "ovs-vswitchd") {
		for i := 0; i < 100 && pidAlive(monitor); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cmd := exec.CommandContext(ctx, "setsid", "/usr/share/openvswitch/scripts/ovs-ctl", "--no-ovsdb-server", "start")
	out, cerr := cmd.CombinedOutput()
	startedAt = time.Now()
	if cerr != nil {
		err = fmt.Errorf("ovs-ctl --no-ovsdb-server start: %w: %s", cerr, out)
		return
	}
	newPid, err = VswitchdPid()
	return
}

func pidAlive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(st))
	return !(len(f) > 2 && f[2] == "Z")
}

func cmdlineHas(pid int, s string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), s)
}

func parentPid(pid int) int {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// comm may hold spaces: the fields after the last ')' are fixed.
	s := string(st)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// Isolated sets up, in both VMs, a host route and a static neighbour entry
// for the other one, so that an echo request goes straight to the other
// VM's MAC without ARP and a reply could come back: if the networks leaked
// into each other, the ping would succeed.
func Isolated(ctx context.Context, a, b *VM) (PingStats, error) {
	for _, p := range [][2]*VM{{a, b}, {b, a}} {
		from, to := p[0], p[1]
		if _, err := from.Exec(ctx, "ip", "route", "replace", to.IP+"/32", "dev", "eth0"); err != nil {
			return PingStats{}, err
		}
		if _, err := from.Exec(ctx, "ip", "neigh", "replace", to.IP, "lladdr", to.MAC, "dev", "eth0", "nud", "permanent"); err != nil {
			return PingStats{}, err
		}
	}
	return a.Ping(ctx, b.IP, 10)
}
