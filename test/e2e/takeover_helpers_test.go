//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Paths of the reference agent as refenv installs it (inside the chroot
// for 2025.1 and 2026.2; refNeutronConf() is the host path: refrelease_test.go).
const (
	refAgentBin     = "/usr/bin/neutron-openvswitch-agent"
	refAgentIniPath = "/etc/neutron/refenv/openvswitch_agent.ini"
)

// takeoverFiles writes the test's copy of refenv's openvswitch_agent.ini
// (plus an [ovsagent] metrics_listen the Python agent ignores) in a
// directory of its own. Both agents are started with exactly
// --config-file refNeutronConf() --config-file <ini> (host paths; the
// directory is inside the chroot of a chroot release).
func takeoverFiles(t testing.TB) (dir, ini, metrics string) {
	t.Helper()
	base, err := refBaseIni()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(refTmpDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err = os.MkdirTemp(refTmpDir(), "takeover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reference agent of release %s (chroot %q)", refRelease(), refChroot())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics = l.Addr().String()
	l.Close()
	restoreManagers(t)
	ini = filepath.Join(dir, "openvswitch_agent.ini")
	body := base + "\n# ovsagent only (the reference ignores unknown sections)\n[ovsagent]\nmetrics_listen = " + metrics + "\n"
	if err := os.WriteFile(ini, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ini, metrics
}

// refAgent is a reference Python agent the test started in its own session.
// It and every process it spawned (privsep helpers through sudo, ovsdb-client
// monitors) are recorded by pid and stopped by pid after checking their
// command line.
type refAgent struct {
	t       testing.TB
	ini     string
	logPath string
	pidfile string
	cmd     *exec.Cmd
	done    chan struct{}

	mu    sync.Mutex
	procs map[int]string // pid -> cmdline when recorded (agent descendants)
}

func cmdlineOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

func ppidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
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

func allPids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// startRefAgent runs the reference agent as refenv/setup.sh does, with the
// test's ini; it is stopped at cleanup if the test did not stop it.
func startRefAgent(t testing.TB, dir, ini string) *refAgent {
	t.Helper()
	return startRefAgentIn(t, dir, ini, "", nil...)
}

// startRefAgentIn is startRefAgent inside network namespace netns (a
// twohost hypervisor; "" is the host's own) with env added to its
// environment. A hypervisor with a private OVS needs OVS_RUNDIR there: the
// reference's OVS firewall writes its flows with `ovs-ofctl ... br-int`,
// which finds the bridge's management socket through OVS_RUNDIR (a path,
// not a namespaced object: without it the flows land on the system OVS).
func startRefAgentIn(t testing.TB, dir, ini, netns string, env ...string) *refAgent {
	t.Helper()
	// ini as the agent's processes name it (their command lines are matched)
	r := &refAgent{t: t, ini: inChroot(ini), logPath: filepath.Join(dir, "neutron-openvswitch-agent.log"),
		pidfile: filepath.Join(dir, "neutron-openvswitch-agent.pid"), procs: map[int]string{}}
	out, err := os.OpenFile(filepath.Join(dir, "neutron-openvswitch-agent.stdout"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var binds []string
	for _, kv := range env {
		if d, ok := strings.CutPrefix(kv, "OVS_RUNDIR="); ok {
			binds = append(binds, d)
		}
	}
	argv := refAgentArgv([]string{refNeutronConf(), ini}, r.logPath, binds)
	if netns != "" {
		// ip netns exec execs the agent: the recorded pid is the agent's.
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/var/lib/neutron"
	if refChroot() != "" {
		cmd.Dir = "/" // chroot(8) changes to the chroot's / anyway
	}
	cmd.Env = append(append(os.Environ(), "PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", refAgentBin, err)
	}
	r.cmd = cmd
	r.done = make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(r.done) }()
	_ = os.WriteFile(r.pidfile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	t.Logf("reference agent pid %d, log %s", cmd.Process.Pid, r.logPath)
	// Record its descendants as they appear (privsep helpers daemonise and
	// are reparented to init, so they must be seen while their parent lives).
	go func() {
		for {
			r.record()
			select {
			case <-r.done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { r.Stop(20 * time.Second) })
	return r
}

// record adds every live descendant of the agent, and every process whose
// command line names the test's own ini file (a privsep helper already
// reparented to init), to the recorded set.
func (r *refAgent) record() {
	if r.cmd == nil {
		return
	}
	root := r.cmd.Process.Pid
	pids := allPids()
	parent := map[int]int{}
	for _, p := range pids {
		parent[p] = ppidOf(p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range pids {
		if p == root {
			continue
		}
		desc := false
		for q, n := parent[p], 0; q > 1 && n < 20; q, n = parent[q], n+1 {
			if q == root {
				desc = true
				break
			}
			if _, ok := r.procs[q]; ok {
				desc = true
				break
			}
		}
		cl := cmdlineOf(p)
		if desc || strings.Contains(cl, r.ini) {
			if _, ok := r.procs[p]; !ok && cl != "" {
				r.procs[p] = cl
			}
		}
	}
}

func (r *refAgent) Pid() int { return r.cmd.Process.Pid }

func (r *refAgent) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL (the reference
// ignores SIGTERM for longer than 15 s); then its recorded helpers get
// SIGTERM (SIGKILL after 5 s). Each signal goes only to a pid whose command
// line is still the recorded one. It returns how long the agent took to go.
func (r *refAgent) Stop(grace time.Duration) (time.Duration, bool) {
	if r.cmd == nil {
		return 0, false
	}
	r.record()
	start := time.Now()
	killed := false
	pid := r.Pid()
	if !r.exited() && strings.Contains(cmdlineOf(pid), "neutron-openvswitch-agent") {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(grace):
			if strings.Contains(cmdlineOf(pid), "neutron-openvswitch-agent") {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				killed = true
			}
			<-r.done
		}
	}
	took := time.Since(start)
	r.mu.Lock()
	procs := make(map[int]string, len(r.procs))
	for p, c := range r.procs {
		procs[p] = c
	}
	r.mu.Unlock()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		left := 0
		for p, c := range procs {
			if cmdlineOf(p) == c {
				_ = syscall.Kill(p, sig)
				left++
			}
		}
		if left == 0 {
			break
		}
		for i := 0; i < 50; i++ {
			alive := 0
			for p, c := range procs {
				if cmdlineOf(p) == c {
					alive++
				}
			}
			if alive == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var still []string
	for p, c := range procs {
		if cmdlineOf(p) == c {
			still = append(still, fmt.Sprintf("%d %s", p, c))
		}
	}
	if len(still) > 0 {
		r.t.Errorf("reference agent helpers still running: %v", still)
	}
	os.Remove(r.pidfile)
	r.cmd = nil
	return took, killed
}

// Helpers returns the recorded helper processes (for the log).
func (r *refAgent) Helpers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for p, c := range r.procs {
		if len(c) > 90 {
			c = c[:90] + "…"
		}
		out = append(out, fmt.Sprintf("%d %s", p, c))
	}
	sort.Strings(out)
	return out
}

// LogTail returns the last n lines of the reference agent's log.
func (r *refAgent) LogTail(n int) string {
	data, _ := os.ReadFile(r.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tcpSession is one long-lived TCP connection from a VM to an echo server:
// a line every interval, each must come back.
type tcpSession struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string

	mu       sync.Mutex
	sent     int
	got      int
	failures []string
	maxRTT   time.Duration
	stop     chan struct{}
	stopped  chan struct{}
}

// echoSession serves a TCP echo on to:port and opens a session to it from
// from, a line every 100 ms (retrying for 6 s: the path may still be
// settling). The server stops at the end of the test.
func echoSession(t *testing.T, from, to *VM, port int) *tcpSession {
	t.Helper()
	srv, err := to.ServeTCPEcho(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	var sess *tcpSession
	for i := 0; i < 30; i++ {
		if sess, err = openTCPSession(from, to.IP, port, 100*time.Millisecond); err == nil {
			return sess
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("TCP session %s -> %s:%d: %v", from.NS, to.IP, port, err)
	return nil
}

func openTCPSession(vm *VM, ip string, port int, every time.Duration) (*tcpSession, error) {
	cmd := exec.Command("ip", "netns", "exec", vm.NS, "socat", "-", fmt.Sprintf("TCP:%s:%d,connect-timeout=3", ip, port))
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &tcpSession{cmd: cmd, in: in, lines: make(chan string, 16), stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(outp)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	// first exchange: the session is up
	if err := s.exchange(5 * time.Second); err != nil {
		s.close()
		return nil, err
	}
	go s.loop(every)
	return s, nil
}

func (s *tcpSession) exchange(timeout time.Duration) error {
	s.mu.Lock()
	s.sent++
	n := s.sent
	s.mu.Unlock()
	msg := fmt.Sprintf("seq-%d", n)
	start := time.Now()
	if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
		return fmt.Errorf("tcp session: write %s: %w", msg, err)
	}
	select {
	case l, ok := <-s.lines:
		if !ok {
			return fmt.Errorf("tcp session: closed (waiting for %s)", msg)
		}
		if l != msg {
			return fmt.Errorf("tcp session: got %q, want %q", l, msg)
		}
	case <-time.After(timeout):
		return fmt.Errorf("tcp session: no echo of %s within %s", msg, timeout)
	}
	rtt := time.Since(start)
	s.mu.Lock()
	s.got++
	if rtt > s.maxRTT {
		s.maxRTT = rtt
	}
	s.mu.Unlock()
	return nil
}

func (s *tcpSession) loop(every time.Duration) {
	defer close(s.stopped)
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(every):
		}
		if err := s.exchange(3 * time.Second); err != nil {
			s.mu.Lock()
			s.failures = append(s.failures, time.Now().Format("15:04:05.000")+" "+err.Error())
			s.mu.Unlock()
			if strings.Contains(err.Error(), "closed") || strings.Contains(err.Error(), "write") {
				return
			}
		}
	}
}

// Stop ends the exchanges (one last one must succeed) and closes the session.
func (s *tcpSession) Stop() (sent, got int, maxRTT time.Duration, failures []string) {
	close(s.stop)
	<-s.stopped
	if err := s.exchange(3 * time.Second); err != nil {
		s.mu.Lock()
		s.failures = append(s.failures, "final: "+err.Error())
		s.mu.Unlock()
	}
	s.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.got, s.maxRTT, append([]string(nil), s.failures...)
}

func (s *tcpSession) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// normalizedFlows is a bridge's flow table without cookies (and without
// learned flows, whose presence depends on traffic), sorted.
func normalizedFlows(ctx context.Context, o OVS, br string) ([]string, error) {
	fs, err := o.DumpFlows(ctx, br)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range fs {
		if strings.Contains(f, "hard_timeout=") && strings.Contains(f, "table=20") {
			continue // learned
		}
		f = strings.TrimSpace(cookieRe.ReplaceAllString(f, ""))
		f = strings.TrimPrefix(f, ", ")
		out = append(out, f)
	}
	sort.Strings(out)
	return out, nil
}

func head(ls []string, n int) []string {
	if len(ls) > n {
		return ls[:n]
	}
	return ls
}

// restoreManagers puts the Open_vSwitch manager targets back as they are
// now at the end of the test: the reference agent adds a Manager for its
// ovsdb_connection (punix:/var/run/openvswitch/db.sock) when it starts.
// ovsdb-server keeps listening on its command-line socket of the same path.
func restoreManagers(t testing.TB) {
	o := OVS{}
	before, err := o.Vsctl(context.Background(), "get-manager")
	if err != nil {
		t.Fatalf("get-manager: %v", err)
	}
	ctls := map[string]string{}
	for _, br := range []string{"br-int", "br-tun", "br-phys"} {
		ctls[br], _ = o.Vsctl(context.Background(), "get-controller", br)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		// The reference's Controller rows too (it adds tcp:127.0.0.1:6633). Changing
		// whether a bridge has a controller flushes its flows: this runs last, with
		// every agent and VM of the test gone, under the e2e lock.
		for br, before := range ctls {
			now, err := o.Vsctl(ctx, "get-controller", br)
			if err != nil || now == before {
				continue
			}
			args := []string{"del-controller", br}
			if b := strings.Fields(before); len(b) > 0 {
				args = append([]string{"set-controller", br}, b...)
			}
			if _, err := o.Vsctl(ctx, args...); err != nil {
				t.Errorf("restore controllers of %s: %v", br, err)
			} else {
				t.Logf("%s controllers %q restored to %q", br, now, before)
			}
		}
		now, err := o.Vsctl(ctx, "get-manager")
		if err != nil || now == before {
			return
		}
		args := []string{"del-manager"}
		if b := strings.Fields(before); len(b) > 0 {
			args = append([]string{"set-manager"}, b...)
		}
		if _, err := o.Vsctl(ctx, args...); err != nil {
			t.Errorf("restore managers %q: %v", before, err)
		} else {
			t.Logf("managers %q (the reference added them) restored to %q", now, before)
		}
	})
}

// timingMetrics returns the agent's histogram sums and counts that split
// its start-up time (RPCs by method, bundles by bridge, batches).
func timingMetrics(ctx context.Context, a *Agent) string {
	req, err := http.NewRequestWithContext(ctx, "GET", a.MetricsURL(), nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		for _, m := range []string{"ovsagent_rpc_duration_seconds_", "ovsagent_bundle_apply_seconds_", "ovsagent_port_wiring_stage_seconds_", "ovsagent_loop_duration_seconds_", "ovsagent_flows{"} {
			if strings.HasPrefix(l, m) && (strings.Contains(l, "_sum") || strings.Contains(l, "_count") || strings.HasPrefix(l, "ovsagent_flows{")) {
				out = append(out, strings.TrimPrefix(l, "ovsagent_"))
			}
		}
	}
	return strings.Join(out, "; ")
}
