//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
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

// The refenv neutron-server as refenv/setup.sh starts it:
//
//	cd /var/lib/neutron
//	setsid nohup /usr/bin/neutron-server $NCONF --config-file .../ml2_conf.ini \
//	  --log-file $LOG/refenv-server.log > $LOG/refenv-server.stdout 2>&1 < /dev/null &
//	echo $! > /run/refenv/neutron-server.pid
//
// with PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin exported and the
// rest of the environment inherited. The master renames itself
// (setproctitle): /proc/PID/cmdline becomes one string with spaces and
// /proc/PID/environ is overwritten, so the environment is setup.sh's, not
// read back.
const (
	refServerPidfile = "/run/refenv/neutron-server.pid"
	refServerBin     = "/usr/bin/neutron-server"
	refServerDir     = "/var/lib/neutron"
	refServerStdout  = "/var/log/neutron/refenv-server.stdout"
	refServerPATH    = "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"
	refServerListen  = "127.0.0.1:9696"
)

var refServerArgs = []string{
	"--config-file", "/etc/neutron/refenv/neutron.conf",
	"--config-file", "/etc/neutron/refenv/ml2_conf.ini",
	"--log-file", "/var/log/neutron/refenv-server.log",
}

// RefServer is the running refenv neutron-server: its master pid (from the
// pid file, checked against /proc/PID/cmdline) and how to start it again.
type RefServer struct {
	Pid    int
	Argv   []string // refServerBin and its arguments
	Dir    string
	Stdout string
}

// FindRefServer reads /run/refenv/neutron-server.pid and checks that the pid
// is a live neutron-server master; the command line to start it again is
// read back from /proc (it must be setup.sh's: the binary, --config-file
// and --log-file only).
func FindRefServer() (*RefServer, error) {
	pid, ok := alivePid(refServerPidfile, refServerBin)
	if !ok {
		return nil, fmt.Errorf("no live neutron-server at the pid in %s (pid %d)", refServerPidfile, pid)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	// "/usr/bin/python3\0/usr/bin/neutron-server\0--config-file\0..." or,
	// renamed, "/usr/bin/python3 /usr/bin/neutron-server --config-file ...";
	// refenv's paths hold no spaces.
	f := strings.Fields(strings.ReplaceAll(string(raw), "\x00", " "))
	i := 0
	for i < len(f) && f[i] != refServerBin {
		i++
	}
	if i == len(f) {
		return nil, fmt.Errorf("pid %d: %q does not run %s", pid, raw, refServerBin)
	}
	if i > 1 || strings.HasPrefix(f[0], "neutron-server:") {
		return nil, fmt.Errorf("pid %d is not the master: %q", pid, raw)
	}
	s := &RefServer{Pid: pid, Argv: f[i:], Dir: refServerDir, Stdout: refServerStdout}
	if strings.Join(s.Argv[1:], " ") != strings.Join(refServerArgs, " ") {
		return nil, fmt.Errorf("pid %d runs %q, not setup.sh's command line %q", pid, s.Argv, refServerArgs)
	}
	if d, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil {
		s.Dir = d
	}
	if o, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", pid)); err == nil && strings.HasPrefix(o, "/") {
		s.Stdout = o
	}
	return s, nil
}

// children lists the pids whose parent is pid and whose command line names
// the neutron-server binary (its api/rpc/periodic workers).
func refServerChildren(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil || parentPid(c) != pid || !cmdlineHas(c, refServerBin) {
			continue
		}
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// Stop sends SIGTERM to the master (after checking /proc/PID/cmdline again)
// and waits until it and its workers are gone and nothing listens on
// 127.0.0.1:9696. After timeout: SIGKILL to whichever of them is still a
// neutron-server. It returns how long the exit took.
func (s *RefServer) Stop(timeout time.Duration) (time.Duration, error) {
	if !cmdlineHas(s.Pid, refServerBin) {
		return 0, fmt.Errorf("pid %d no longer runs %s", s.Pid, refServerBin)
	}
	pids := append([]int{s.Pid}, refServerChildren(s.Pid)...)
	start := time.Now()
	if err := syscall.Kill(s.Pid, syscall.SIGTERM); err != nil {
		return 0, err
	}
	gone := func() bool {
		for _, p := range pids {
			if pidAlive(p) && cmdlineHas(p, refServerBin) {
				return false
			}
		}
		c, err := net.DialTimeout("tcp", refServerListen, time.Second)
		if err == nil {
			c.Close()
			return false
		}
		return true
	}
	for time.Since(start) < timeout {
		if gone() {
			return time.Since(start), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range pids {
		if pidAlive(p) && cmdlineHas(p, refServerBin) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	for i := 0; i < 100 && !gone(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if !gone() {
		return time.Since(start), fmt.Errorf("neutron-server pids %v still there after SIGKILL", pids)
	}
	return time.Since(start), fmt.Errorf("neutron-server did not exit within %s of SIGTERM; killed", timeout)
}

// Start starts neutron-server again as setup.sh does (same command line,
// working directory, setup.sh's PATH, a session of its own, stdin
// /dev/null, stdout+stderr to the same file — appended, not truncated) and
// records the new pid in the pid file. The process outlives the test.
func (s *RefServer) Start() error {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	out, err := os.OpenFile(s.Stdout, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("nohup", s.Argv...)
	cmd.Dir = s.Dir
	env := []string{"PATH=" + refServerPATH}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // setsid: the pid is nohup's, then neutron-server's
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reaped if it dies while the test runs
	s.Pid = cmd.Process.Pid
	return os.WriteFile(refServerPidfile, []byte(strconv.Itoa(s.Pid)+"\n"), 0o644)
}

// refenvSetup is the repository's refenv/setup.sh ($OVSAGENT_REFENV/setup.sh
// when set: .ci/run exports it).
func refenvSetup() (string, error) {
	dir := os.Getenv("OVSAGENT_REFENV")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "refenv")
	}
	p := filepath.Join(dir, "setup.sh")
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// startServerWatchdog starts, in a session of its own, a shell that waits
// for this test process to end and then, if the refenv neutron-server is not
// running, runs "AGENT=none setup.sh" (which starts only what is missing).
// It covers what t.Cleanup cannot: a test binary killed by -timeout or by a
// panic in another goroutine while the server is down. Stop it once the
// server is back.
func startServerWatchdog(t *testing.T) *Daemon {
	t.Helper()
	setup, err := refenvSetup()
	if err != nil {
		t.Fatalf("refenv setup.sh: %v", err)
	}
	log := filepath.Join("/tmp/ovsagent-e2e", fmt.Sprintf("server-watchdog-%d.log", os.Getpid()))
	script := fmt.Sprintf(`exec >> %s 2>&1
while kill -0 %d 2>/dev/null; do sleep 2; done
p=$(cat %s 2>/dev/null)
if [ -n "$p" ] && tr '\0' ' ' 2>/dev/null < /proc/$p/cmdline | grep -q %s; then exit 0; fi
echo "$(date +%%T) test process gone, neutron-server down: AGENT=none %s"
AGENT=none setsid %s`, log, os.Getpid(), refServerPidfile, refServerBin, setup, setup)
	d := &Daemon{argv: []string{"/bin/bash", "-c", script}}
	if err := d.Start(); err != nil {
		t.Fatalf("watchdog: %v", err)
	}
	return d
}

// waitAPI polls GET /v2.0/networks until it answers 200.
func (e *Env) waitAPI(timeout time.Duration) (time.Duration, bool) {
	return waitFor(e.Ctx, timeout, func() bool {
		_, err := e.Neutron.ListNetworks(e.Ctx, url.Values{"limit": {"1"}})
		return err == nil
	})
}

// removedFlows is what of before is missing in now, learned br-tun flows
// (table 20, hard_timeout: they expire) left out.
func removedFlows(before, now []string) (removed, added []string) {
	for _, l := range diffSets(before, now) {
		if strings.Contains(l, "table=20") && strings.Contains(l, "hard_timeout") {
			continue
		}
		if strings.HasPrefix(l, "- ") {
			removed = append(removed, l)
		} else {
			added = append(added, l)
		}
	}
	return removed, added
}

// describeGap says where the longest gap between two replies lies: the
// sequence numbers around it (consecutive: ping itself sent nothing
// meanwhile, the process was not scheduled; apart: requests went
// unanswered for that long) and the nearest test event.
func describeGap(rep PingReport, events map[string]time.Time) string {
	if rep.MaxGap == 0 {
		return "no gap"
	}
	seqAt := map[int64]int{}
	for _, l := range strings.Split(rep.Output, "\n") {
		if m := pingReplyLine.FindStringSubmatch(l); m != nil {
			us, _ := strconv.ParseInt((m[2] + "000000")[:6], 10, 64)
			sec, _ := strconv.ParseInt(m[1], 10, 64)
			seq, _ := strconv.Atoi(m[3])
			seqAt[sec*1e6+us] = seq
		}
	}
	seq := func(t time.Time) int {
		if s, ok := seqAt[t.UnixMicro()]; ok {
			return s
		}
		return -1
	}
	unanswered := strings.Count(rep.Output, "no answer yet")
	near, nearD := "", time.Duration(1<<62)
	for name, at := range events {
		d := rep.LastBefore.Sub(at)
		if d < 0 {
			d = -d
		}
		if d < nearD {
			near, nearD = name, d
		}
	}
	return fmt.Sprintf("longest gap %s between replies icmp_seq=%d and %d at %s (%s from %s); %d \"no answer yet\"",
		rep.MaxGap.Round(time.Millisecond), seq(rep.LastBefore), seq(rep.MaxGapAfter), rep.LastBefore.UTC().Format("15:04:05.000"),
		nearD.Round(time.Millisecond), near, unanswered)
}

// oslo.log's line: the message runs up to the first key=value attribute.
var warnMsg = regexp.MustCompile(`^\S+ \S+ \d+ (WARNING|ERROR) \S+ \[-\] (.*?)(?: [a-z_]+=.*)?$`)

// TestReliabServerStopped stops the real refenv neutron-server (SIGTERM to
// the pid in /run/refenv/neutron-server.pid) for 2 minutes while vm1 pings
// vm2, plugs a VM (port created before) in the middle of the outage, then
// starts the server again as setup.sh does. Meanwhile: the agent keeps
// running, no flow is removed (none changes at all before the plug), no ping
// is lost. Afterwards: neutron sees the agent alive again, vm1/vm2 never
// leave ACTIVE, the VM plugged during the outage and a VM plugged after it
// go ACTIVE and answer pings, no stale flow.
//
// The server is down for about 2.5 minutes for everything on the machine:
// tests outside the e2e lock that call it (internal/oslo's interop test)
// fail meanwhile. A t.Cleanup starts it again if the test stopped it, and a
// watchdog outside the test process does so if the process dies.
func TestReliabServerStopped(t *testing.T) {
	e := NewEnv(t)
	srv, err := FindRefServer()
	if err != nil {
		t.Fatalf("refenv neutron-server: %v", err)
	}
	t.Logf("neutron-server master pid %d (workers %v): %s, cwd %s, stdout %s", srv.Pid, refServerChildren(srv.Pid), strings.Join(srv.Argv, " "), srv.Dir, srv.Stdout)
	agent, took := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	agentPid := agent.Pid()
	t.Logf("agent alive after %s", took)
	nw := e.Network(NetworkSpec{Name: "srvstop", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.36.0/24")
	vm1, vm2 := e.VM(nw, "vm1"), e.VM(nw, "vm2")
	e.WaitStatus(vm1.Port, "ACTIVE", 60*time.Second)
	e.WaitStatus(vm2.Port, "ACTIVE", 60*time.Second)
	// vm3's port exists (bound to hv1, DOWN) before the server goes; it is
	// plugged while the server is down.
	p3 := e.Port(PortSpec{Name: "vm3", NetworkID: nw.ID})
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	bridges := []string{"br-int", "br-tun"}
	if e.OVS.BridgeExists(e.Ctx, "br-phys") {
		bridges = append(bridges, "br-phys")
	}
	snapshot := func() map[string][]string {
		m := map[string][]string{}
		for _, br := range bridges {
			fs, err := e.OVS.FlowSet(e.Ctx, br)
			if err != nil {
				t.Fatal(err)
			}
			m[br] = fs
		}
		return m
	}
	flowsBefore := snapshot()
	tagsBefore, err := tagsOf(e.Ctx, e.OVS)
	if err != nil {
		t.Fatal(err)
	}
	resyncsBefore, _, _ := metricSum(e.Ctx, agent, "ovsagent_resyncs_total")
	logBefore := len(agent.Log())

	pinger, err := vm1.StartTimedPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	pingStopped := false
	defer func() {
		if !pingStopped {
			pinger.Stop()
		}
	}()
	watch := e.WatchStatus(vm1.Port, vm2.Port)
	watchStopped := false
	defer func() {
		if !watchStopped {
			watch.Stop()
		}
	}()

	// From here the server may be down: the cleanup (registered last, so run
	// first, before the ports and networks are deleted through the API)
	// starts it again if the test has not.
	stopped, restarted := false, false
	watchdog := startServerWatchdog(t)
	t.Cleanup(func() {
		if stopped && !restarted {
			t.Logf("cleanup: starting neutron-server again")
			if err := srv.Start(); err != nil {
				t.Errorf("cleanup: start neutron-server: %v (run AGENT=none refenv/setup.sh)", err)
				return
			}
			restarted = true
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if d, ok := waitFor(ctx, 3*time.Minute, func() bool {
				_, err := NewNeutron(Project).ListNetworks(ctx, url.Values{"limit": {"1"}})
				return err == nil
			}); !ok {
				t.Errorf("cleanup: neutron-server (pid %d) API not answering after %s", srv.Pid, d)
				return
			}
		}
		if _, ok := alivePid(refServerPidfile, refServerBin); ok || !stopped {
			watchdog.Stop()
		}
	})

	// the last heartbeat neutron saw before the stop
	aiBefore, err := e.Neutron.OVSAgent(e.Ctx, "hv1")
	if err != nil || aiBefore == nil {
		t.Fatalf("agent row of hv1: %v %v", aiBefore, err)
	}
	termAt := time.Now()
	stopped = true
	stopTook, err := srv.Stop(90 * time.Second)
	t.Logf("neutron-server pid %d: SIGTERM, master and workers gone and :9696 closed %s later", srv.Pid, stopTook.Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// the 2 minutes count from when nothing of the server is left
	downAt := time.Now()
	if _, err := e.Neutron.ListNetworks(e.Ctx, url.Values{"limit": {"1"}}); err == nil {
		t.Fatal("the API still answers after neutron-server stopped")
	}

	const outage = 2 * time.Minute
	const plugAfter = 60 * time.Second
	check := func(when string, exact bool) {
		now := snapshot()
		for _, br := range bridges {
			removed, added := removedFlows(flowsBefore[br], now[br])
			t.Logf("%s: %s %d flows, %d of those before removed, %d added", when, br, len(now[br]), len(removed), len(added))
			if len(removed) > 0 {
				t.Errorf("%s: %s: flows removed while neutron-server was down: %v", when, br, firstN(removed, 5))
			}
			if exact && len(added) > 0 {
				t.Errorf("%s: %s: flows added while neutron-server was down and nothing was plugged: %v", when, br, firstN(added, 5))
			}
		}
		if tags, err := tagsOf(e.Ctx, e.OVS); err != nil {
			t.Errorf("%s: %v", when, err)
		} else {
			for _, vm := range []*VM{vm1, vm2} {
				if tags[vm.Tap] != tagsBefore[vm.Tap] {
					t.Errorf("%s: %s tag %d, was %d", when, vm.Tap, tags[vm.Tap], tagsBefore[vm.Tap])
				}
			}
		}
		hz, herr := agent.Healthz(e.Ctx)
		t.Logf("%s: agent pid %d running=%v, /healthz %d %v, ping replies so far %d", when, agentPid, agent.Pid() == agentPid, hz, herr, pinger.Replies())
		if agent.Pid() != agentPid {
			t.Fatalf("%s: agent exited while neutron-server was down: %v\n%s", when, agent.ExitErr(), agent.LogTail(40))
		}
	}
	time.Sleep(plugAfter - 5*time.Second - time.Since(downAt))
	check(fmt.Sprintf("%s into the outage", time.Since(downAt).Round(time.Second)), true)
	time.Sleep(time.Until(downAt.Add(plugAfter)))
	pluggedAt := time.Now()
	vm3 := e.Plug(PlugSpec{Port: p3, MTU: nw.MTU})
	t.Logf("vm3 plugged %s into the outage", pluggedAt.Sub(downAt).Round(time.Second))
	// Not required: the agent may wire vm3 from the ports the server pushed
	// before it stopped (its cache), but cannot report it up.
	if d, err := vm3.PingUntil(e.Ctx, vm1.IP, 20*time.Second); err != nil {
		t.Logf("vm3 -> vm1 while the server is down: no reply within 20 s")
	} else {
		t.Logf("vm3 -> vm1 while the server is down: first reply %.2f s after the plug (%.2f s of pinging)", time.Since(pluggedAt).Seconds(), d.Seconds())
	}
	time.Sleep(time.Until(downAt.Add(outage - 3*time.Second)))
	check(fmt.Sprintf("%s into the outage", time.Since(downAt).Round(time.Second)), false)
	if tag, err := e.OVS.PortTag(e.Ctx, vm3.Tap); err == nil {
		t.Logf("vm3 tap tag while the server is down: %d", tag)
	}
	time.Sleep(time.Until(downAt.Add(outage)))

	startedAt := time.Now()
	if err := srv.Start(); err != nil {
		t.Fatalf("start neutron-server: %v", err)
	}
	restarted = true
	t.Logf("neutron-server started again %s after it was gone (%s after SIGTERM): pid %d", startedAt.Sub(downAt).Round(time.Second), startedAt.Sub(termAt).Round(time.Second), srv.Pid)
	apiD, ok := e.waitAPI(3 * time.Minute)
	apiAt := time.Now()
	t.Logf("API answering %s after the start", apiD.Round(time.Millisecond))
	if !ok {
		t.Fatalf("neutron-server API not answering %s after the start; see /var/log/neutron/refenv-server.log", apiD)
	}
	if _, ok := alivePid(refServerPidfile, refServerBin); !ok {
		t.Errorf("%s does not name a live neutron-server", refServerPidfile)
	}

	// neutron sees the agent again: alive, with a heartbeat newer than the
	// last one before the stop.
	var ai *AgentInfo
	d, ok := waitFor(e.Ctx, 150*time.Second, func() bool {
		ai, err = e.Neutron.OVSAgent(e.Ctx, "hv1")
		return err == nil && ai != nil && ai.Alive && ai.HeartbeatTimestamp != aiBefore.HeartbeatTimestamp
	})
	t.Logf("hv1 alive again with a new heartbeat %s after the API answered (%s after the start): %v (heartbeat %s -> %v)",
		d.Round(time.Millisecond), time.Since(startedAt).Round(time.Millisecond), ok, aiBefore.HeartbeatTimestamp, func() string {
			if ai == nil {
				return "?"
			}
			return ai.HeartbeatTimestamp
		}())
	if !ok {
		t.Errorf("neutron does not see hv1 alive again")
	}

	// the port plugged during the outage
	if p, _, err := e.Neutron.WaitPortStatus(e.Ctx, p3.ID, "ACTIVE", 180*time.Second); err != nil {
		t.Errorf("vm3 (plugged during the outage) not ACTIVE: %v (status %v)", err, p)
	} else {
		d3 := time.Since(apiAt)
		t.Logf("vm3 (plugged during the outage) ACTIVE %.1f s after the API answered (%.1f s after the start)", d3.Seconds(), time.Since(startedAt).Seconds())
		if _, err := vm3.PingUntil(e.Ctx, vm1.IP, 30*time.Second); err != nil {
			t.Error(err)
		}
	}

	// a port created and plugged now
	vm4 := e.VM(nw, "vm4")
	d4, err := func() (time.Duration, error) {
		_, d, err := e.Neutron.WaitPortStatus(e.Ctx, vm4.Port.ID, "ACTIVE", 120*time.Second)
		return d, err
	}()
	t.Logf("vm4 (plugged after the server came back) ACTIVE %.2f s after the plug: %v", d4.Seconds(), err)
	if err != nil {
		t.Error(err)
	} else if _, err := vm4.PingUntil(e.Ctx, vm2.IP, 30*time.Second); err != nil {
		t.Error(err)
	}

	for _, vm := range []*VM{vm1, vm2} {
		p, err := e.Neutron.GetPort(e.Ctx, vm.Port.ID)
		if err != nil || p.Status != "ACTIVE" {
			t.Errorf("%s: %v %v, want ACTIVE", vm.NS, p, err)
		}
	}
	// the resync the server's "revived" answer asks for has had time to run
	time.Sleep(5 * time.Second)
	polls, errs, flaps := watch.Stop()
	watchStopped = true
	t.Logf("vm1/vm2 status polled %d times (%d failed, the API being down): non-ACTIVE seen %d times %v", polls, errs, len(flaps), firstN(flaps, 5))
	if len(flaps) > 0 {
		t.Errorf("vm1/vm2 left ACTIVE: %v", firstN(flaps, 10))
	}
	rep := pinger.Stop()
	pingStopped = true
	t.Logf("ping vm1 -> vm2 from before the stop to after the recovery (%s): sent %d, lost %d, %s",
		time.Since(termAt).Round(time.Second), rep.Sent, rep.Lost(), describeGap(rep, map[string]time.Time{
			"SIGTERM": termAt, "server gone": downAt, "vm3 plugged": pluggedAt, "server started": startedAt, "API answering": apiAt}))
	if rep.Lost() > 0 {
		t.Errorf("pings lost: sent %d lost %d, longest gap %s ending %s", rep.Sent, rep.Lost(), rep.MaxGap, rep.MaxGapAfter.Format("15:04:05.000"))
	}
	check("after the recovery", false)
	if stale, err := staleFlows(e.Ctx, e.OVS, agent); err != nil || len(stale) > 0 {
		t.Errorf("stale flows: %v %v", firstN(stale, 10), err)
	}
	resyncs, by, _ := metricSum(e.Ctx, agent, "ovsagent_resyncs_total")
	t.Logf("agent resyncs during the test: %v (%v)", resyncs-resyncsBefore, by)

	// what the agent said about the outage: WARN/ERROR messages by kind
	kinds := map[string]int{}
	for _, l := range strings.Split(agent.Log()[logBefore:], "\n") {
		if m := warnMsg.FindStringSubmatch(l); m != nil {
			kinds[m[1]+" "+m[2]]++
		}
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n  %4d %s", kinds[k], k)
	}
	t.Logf("agent WARN/ERROR lines since the stop:%s", sb.String())
	if agent.Pid() != agentPid {
		t.Errorf("agent pid changed: %d -> %d (%v)", agentPid, agent.Pid(), agent.ExitErr())
	}
}
