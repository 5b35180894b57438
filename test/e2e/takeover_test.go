//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

var takeoverBridges = []string{"br-int", "br-tun", "br-phys"}

// swapResult is what one agent swap cost.
type swapResult struct {
	syncAfter  time.Duration // ovsagent_in_sync = 1 (0 for the reverse swap)
	cleanAfter time.Duration // no flow of the old agent's cookies left
	oldFlows   int           // flows of the old cookies when the new agent started
}

// waitSwapped polls until no flow carries one of old's cookies and, when a
// is not nil, ovs-agent reports in sync. It returns the times from start.
func waitSwapped(t *testing.T, e *Env, start time.Time, old map[string]int, a *Agent, timeout time.Duration) swapResult {
	t.Helper()
	var r swapResult
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r.syncAfter == 0 && a != nil {
			if v, err := a.Metric(e.Ctx, "ovsagent_in_sync"); err == nil && v == 1 {
				r.syncAfter = time.Since(start)
			}
		}
		if r.cleanAfter == 0 {
			now, err := flowCookies(e.Ctx, e.OVS, takeoverBridges...)
			if err == nil {
				left := 0
				for c := range old {
					left += now[c]
				}
				if left == 0 {
					r.cleanAfter = time.Since(start)
				}
			}
		}
		if r.cleanAfter != 0 && (a == nil || r.syncAfter != 0) {
			return r
		}
		if a != nil {
			select {
			case <-a.Exited():
				t.Fatalf("ovs-agent exited: %v\n%s", a.ExitErr(), a.LogTail(40))
			default:
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("swap not complete after %s: in sync after %s, old cookies gone after %s", timeout, r.syncAfter, r.cleanAfter)
	return r
}

// startOurs starts ovs-agent with exactly the reference's --config-file
// arguments (refenv's neutron.conf and the test's ini).
func startOurs(t *testing.T, e *Env, ini, metrics string) *Agent {
	t.Helper()
	a, err := NewAgent(AgentConfig{MetricsListen: metrics})
	if err != nil {
		t.Fatal(err)
	}
	a.NeutronConf, a.AgentIni = refNeutronConf(), ini
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ovs-agent pid %d (%s --config-file %s --config-file %s), log %s", a.Pid(), a.Bin, a.NeutronConf, a.AgentIni, a.LogPath)
	t.Cleanup(func() {
		if _, killed, err := a.Stop(20 * time.Second); err != nil || killed {
			t.Errorf("ovs-agent stop: killed=%v err=%v", killed, err)
		}
		if t.Failed() {
			t.Logf("ovs-agent log tail:\n%s", a.LogTail(60))
		}
	})
	return a
}

// waitRefWired waits until the reference agent is alive with a new
// started_at and every port is ACTIVE, then until vm1 reaches vm2.
func waitRefWired(t *testing.T, e *Env, ref *refAgent, before string, ports []*Port, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(e.Ctx, timeout)
	defer cancel()
	for {
		ai, err := e.Neutron.OVSAgent(ctx, e.Host)
		if err == nil && ai != nil && ai.Alive && ai.StartedAt != before {
			break
		}
		if ref.exited() {
			t.Fatalf("reference agent exited:\n%s", ref.LogTail(30))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("reference agent not alive within %s:\n%s", timeout, ref.LogTail(30))
		case <-time.After(500 * time.Millisecond):
		}
	}
	alive := time.Since(start)
	for _, p := range ports {
		if _, _, err := e.Neutron.WaitPortStatus(ctx, p.ID, "ACTIVE", time.Until(startPlus(start, timeout))); err != nil {
			t.Fatalf("reference agent: %v\n%s", err, ref.LogTail(30))
		}
	}
	t.Logf("reference agent alive after %s, %d ports ACTIVE after %s; helpers: %v", alive, len(ports), time.Since(start), ref.Helpers())
	return time.Since(start)
}

func startPlus(t time.Time, d time.Duration) time.Time { return t.Add(d) }

func startedAt(e *Env) string {
	if ai, err := e.Neutron.OVSAgent(e.Ctx, e.Host); err == nil && ai != nil {
		return ai.StartedAt
	}
	return ""
}

func controllers(e *Env) string {
	var parts []string
	for _, br := range takeoverBridges {
		out, _ := e.OVS.Vsctl(e.Ctx, "get-controller", br)
		parts = append(parts, br+"=["+strings.Join(strings.Fields(out), ",")+"]")
	}
	m, _ := e.OVS.Vsctl(e.Ctx, "get-manager")
	return strings.Join(parts, " ") + " manager=[" + strings.Join(strings.Fields(m), ",") + "]"
}

var dryRunSummary = regexp.MustCompile(`add (\d+), modify (\d+), remove (\d+)`)

// dryRun runs `ovs-agent takeover --dry-run` with the agent's files and
// returns its output and the add/modify/remove totals.
func dryRun(t *testing.T, e *Env, a *Agent) (string, [3]int) {
	t.Helper()
	return dryRunFiles(t, e, a.Bin, a.NeutronConf, a.AgentIni)
}

func dryRunFiles(t *testing.T, e *Env, bin, conf, ini string) (string, [3]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.Ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "takeover", "--dry-run", "--config-file", conf, "--config-file", ini).CombinedOutput()
	if err != nil {
		t.Errorf("takeover --dry-run: %v\n%s", err, out)
		return string(out), [3]int{-1, -1, -1}
	}
	var n [3]int
	m := dryRunSummary.FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 {
		t.Errorf("takeover --dry-run: no summary line:\n%s", out)
		return string(out), [3]int{-1, -1, -1}
	}
	last := m[len(m)-1]
	for i := range n {
		n[i], _ = strconv.Atoi(last[i+1])
	}
	return string(out), n
}

// TestTakeoverFromReference: the reference agent of the release the suite
// runs against ($OVSAGENT_RELEASE: zed, 2025.1 or 2026.2) wires two VMs on a
// VXLAN network, one on a VLAN network and takeoverExtraPorts more on the
// VXLAN network (firewall on); with a ping (-i 0.1) and a TCP session
// running between the two VXLAN VMs, it is stopped and ovs-agent started
// with the same --config-file arguments. No ping lost, the TCP session
// lives on, no port leaves ACTIVE, no flow of the reference's cookies is
// left, and the flows are what ovs-agent computes from scratch. Then the
// reverse swap is measured.
func TestTakeoverFromReference(t *testing.T) {
	e := NewEnv(t)
	dir, ini, metrics := takeoverFiles(t)
	t.Logf("files in %s", dir)
	if _, err := AgentBinary(); err != nil { // built now, not on the swap's clock
		t.Fatal(err)
	}

	nw := e.Network(NetworkSpec{Name: "vx", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.8.0/24")
	vnw := e.Network(NetworkSpec{Name: "vl", NetworkType: "vlan", PhysicalNetwork: "physnet1", SegmentationID: 188})
	e.Subnet(vnw.ID, "10.250.9.0/24")
	// The reference agent first, alive, then the VMs: the server binds a
	// port to a host only while an agent of that host is alive.
	before := startedAt(e)
	ref := startRefAgent(t, dir, ini)
	waitRefWired(t, e, ref, before, nil, 240*time.Second)
	vm1, vm2 := e.VM(nw, "vm1"), e.VM(nw, "vm2")
	vm3 := e.VM(vnw, "vm3")
	_, extra := plugPorts(t, e, nw, takeoverExtraPorts, "x")
	ports := append([]*Port{vm1.Port, vm2.Port, vm3.Port}, extra...)
	took := waitRefWired(t, e, ref, before, ports, 400*time.Second)
	t.Logf("release %s: reference agent wired %d ports (all ACTIVE) in %s", refRelease(), len(ports), took)
	if d, err := vm1.PingUntil(e.Ctx, vm2.IP, 60*time.Second); err != nil {
		t.Fatalf("reference wiring: %v\n%s", err, ref.LogTail(30))
	} else {
		t.Logf("vm1 -> vm2 first reply %s after ACTIVE", d)
	}
	tags := map[string]int{}
	for _, vm := range []*VM{vm1, vm2, vm3} {
		tags[vm.Tap], _ = e.OVS.PortTag(e.Ctx, vm.Tap)
	}
	sess := echoSession(t, vm1, vm2, 5008)
	refCookies, err := flowCookies(e.Ctx, e.OVS, takeoverBridges...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reference flows by cookie: %v; tags %v; %s", refCookies, tags, controllers(e))

	pinger, err := vm1.StartPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	watch := e.watchStatusEvery(200*time.Millisecond, ports)
	time.Sleep(time.Second)

	stopTook, killed := ref.Stop(20 * time.Second)
	t.Logf("reference agent stopped after %s (SIGKILL needed: %v)", stopTook, killed)
	bin, _ := AgentBinary()
	plan, pn := dryRunFiles(t, e, bin, refNeutronConf(), ini)
	t.Logf("takeover --dry-run on the reference's dataplane (add/modify/remove %v):\n%s", pn, plan)
	if strings.Contains(plan, "RE-TAGGED") || strings.Contains(plan, "NEW (ports re-tagged)") {
		t.Errorf("the dry run would re-tag ports the reference wired")
	}
	start := time.Now()
	a := startOurs(t, e, ini, metrics)
	r := waitSwapped(t, e, start, refCookies, a, 90*time.Second)
	t.Logf("ovs-agent: in sync %s after start, reference cookies gone after %s", r.syncAfter, r.cleanAfter)
	if wired, err := a.Metric(e.Ctx, "ovsagent_ports_wired"); err != nil || int(wired) != len(ports) {
		t.Errorf("ovsagent_ports_wired = %v (%v), want %d", wired, err, len(ports))
	}
	t.Logf("agent timings: %s", timingMetrics(e.Ctx, a))
	time.Sleep(3 * time.Second)

	st := pinger.Stop()
	polls, _, changes := watch.Stop()
	sent, got, maxRTT, failures := sess.Stop()
	t.Logf("TAKEOVER release %s, %d ports: ping across the swap: sent %d, received %d, lost %d", refRelease(), len(ports), st.Sent, st.Received, st.Lost())
	t.Logf("TCP session: %d sent, %d echoed, max RTT %s, failures %v", sent, got, maxRTT, failures)
	t.Logf("port status: %d polls, non-ACTIVE seen: %v", polls, changes)
	if st.Sent < 20 || st.Lost() != 0 {
		t.Errorf("ping lost %d of %d across the swap", st.Lost(), st.Sent)
	}
	if len(failures) > 0 || got != sent {
		t.Errorf("TCP session did not survive: %v", failures)
	}
	if len(changes) > 0 {
		t.Errorf("ports left ACTIVE: %v", head(changes, 10))
	}
	for _, vm := range []*VM{vm1, vm2, vm3} {
		if tag, _ := e.OVS.PortTag(e.Ctx, vm.Tap); tag != tags[vm.Tap] {
			t.Errorf("%s: local VLAN %d, the reference's was %d", vm.Tap, tag, tags[vm.Tap])
		}
	}
	now, _ := flowCookies(e.Ctx, e.OVS, takeoverBridges...)
	for c := range refCookies {
		if now[c] > 0 {
			t.Errorf("%d flows still carry the reference's cookie %s", now[c], c)
		}
	}
	t.Logf("flows by cookie after the takeover: %v; %s", now, controllers(e))
	// The reference's Controller rows stay (removing a bridge's last
	// controller flushes its flows; see agent's TestReferenceControllerRowsKept).
	for _, br := range takeoverBridges {
		if out, _ := e.OVS.Vsctl(e.Ctx, "get-controller", br); strings.TrimSpace(out) != "tcp:127.0.0.1:6633" {
			t.Errorf("%s: controllers %q after the takeover, want the reference's tcp:127.0.0.1:6633 kept", br, out)
		}
	}

	// The flows are what ovs-agent computes from scratch: the dry run (a
	// fresh computation from OVSDB and the server) finds nothing to do, and
	// a restart of ovs-agent (which keeps its own cookie) leaves the same
	// flow set on the same cookies.
	out, n := dryRun(t, e, a)
	t.Logf("takeover --dry-run after the takeover:\n%s", out)
	if n != [3]int{0, 0, 0} {
		t.Errorf("dry run after the takeover wants add/modify/remove %v, want nothing", n)
	}
	beforeRestart := map[string][]string{}
	for _, br := range takeoverBridges {
		beforeRestart[br], _ = normalizedFlows(e.Ctx, e.OVS, br)
	}
	ourCookies, _ := flowCookies(e.Ctx, e.OVS, takeoverBridges...)
	if _, _, err := a.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	r2 := waitSwapped(t, e, start, nil, a, 60*time.Second)
	afterCookies, _ := flowCookies(e.Ctx, e.OVS, takeoverBridges...)
	t.Logf("ovs-agent restart: in sync %s after start; flows by cookie %v -> %v", r2.syncAfter, ourCookies, afterCookies)
	// the set of cookies (learned flows come and go with traffic; they
	// carry the same cookie)
	if !slices.Equal(slices.Sorted(maps.Keys(ourCookies)), slices.Sorted(maps.Keys(afterCookies))) {
		t.Errorf("ovs-agent restart did not keep its cookies: %v before, %v after", ourCookies, afterCookies)
	}
	for _, br := range takeoverBridges {
		after, _ := normalizedFlows(e.Ctx, e.OVS, br)
		onlyTakeover, onlyFresh := ovsdump.Diff(beforeRestart[br], after)
		t.Logf("%s: %d flows after the takeover, %d after a restart of ovs-agent", br, len(beforeRestart[br]), len(after))
		if len(onlyTakeover)+len(onlyFresh) > 0 {
			t.Errorf("%s differs from ovs-agent's own computation: only after takeover %q; only after restart %q", br, head(onlyTakeover, 10), head(onlyFresh, 10))
		}
	}

	// The way back (not ours to fix): ovs-agent -> reference, measured.
	reverseSwap(t, e, a, dir, ini, vm1, vm2, ports, 5008)
}

// takeoverExtraPorts is how many VM ports TestTakeoverFromReference adds to
// its three (issue 17: a takeover of 20+ ports).
const takeoverExtraPorts = 20

// plugPorts creates n ports on the network bound to e.Host and plugs them
// (8 at a time); everything is removed at cleanup, before the network.
func plugPorts(t *testing.T, e *Env, nw *Network, n int, prefix string) ([]*VM, []*Port) {
	t.Helper()
	vms := make([]*VM, n)
	ports := make([]*Port, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			p, err := e.Neutron.CreatePort(e.Ctx, PortSpec{Name: e.name(fmt.Sprintf("%s%03d", prefix, i)), NetworkID: nw.ID, HostID: e.Host})
			if err != nil {
				errs[i] = err
				return
			}
			ports[i] = p
			vms[i], errs[i] = PlugVM(e.Ctx, PlugSpec{Port: p, MTU: nw.MTU, OVS: e.OVS, EnsureBridge: true})
		}(i)
	}
	wg.Wait()
	t.Cleanup(func() {
		// before the network's cleanup (LIFO); unplugs and deletes one by one take long
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i := range vms {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if vms[i] != nil {
					_ = vms[i].Unplug(ctx)
				}
				if ports[i] != nil {
					if err := e.Neutron.DeletePort(ctx, ports[i].ID); err != nil && !IsNotFound(err) {
						t.Errorf("cleanup: %v", err)
					}
				}
			}(i)
		}
		wg.Wait()
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("port %d: %v", i, err)
		}
	}
	return vms, ports
}

// reverseSwap stops ovs-agent and starts the reference agent with the same
// files while a ping and a TCP session run; it logs the loss and the times
// (the reference's behaviour is not ours to fix: nothing fails here).
func reverseSwap(t *testing.T, e *Env, a *Agent, dir, ini string, vm1, vm2 *VM, ports []*Port, tcpPort int) {
	ours, _ := flowCookies(e.Ctx, e.OVS, takeoverBridges...)
	pinger, err := vm1.StartPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	sess, serr := openTCPSession(vm1, vm2.IP, tcpPort, 100*time.Millisecond)
	watch := e.watchStatusEvery(200*time.Millisecond, ports)
	time.Sleep(time.Second)
	stopTook, _, _ := a.Stop(20 * time.Second)
	before := startedAt(e)
	start := time.Now()
	ref := startRefAgent(t, dir, ini)
	var alive atomic.Int64
	go func() {
		for time.Since(start) < 240*time.Second && !ref.exited() {
			if ai, err := e.Neutron.OVSAgent(e.Ctx, e.Host); err == nil && ai != nil && ai.Alive && ai.StartedAt != before {
				alive.Store(int64(time.Since(start)))
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	r := waitSwapped(t, e, start, ours, nil, 240*time.Second)
	time.Sleep(3 * time.Second)
	st := pinger.Stop()
	polls, _, changes := watch.Stop()
	tcp := fmt.Sprintf("not opened (%v)", serr)
	if serr == nil {
		sent, got, _, failures := sess.Stop()
		tcp = fmt.Sprintf("%d sent, %d echoed, failures %d %v", sent, got, len(failures), head(failures, 2))
	}
	t.Logf("REVERSE SWAP (ovs-agent -> reference): ovs-agent exited %s after SIGTERM; reference alive (new started_at) %s after its start, ovs-agent's flows all replaced after %s; ping sent %d received %d lost %d (~%.1f s of traffic); TCP session: %s; port status polls %d, non-ACTIVE %d %v",
		stopTook, time.Duration(alive.Load()), r.cleanAfter, st.Sent, st.Received, st.Lost(), float64(st.Lost())/10, tcp, polls, len(changes), head(changes, 6))
	if fs, err := flowCookies(e.Ctx, e.OVS, takeoverBridges...); err == nil {
		t.Logf("flows by cookie with the reference back: %v; %s", fs, controllers(e))
	}
	took, killed := ref.Stop(20 * time.Second)
	t.Logf("reference agent stopped after %s (SIGKILL: %v)", took, killed)
}

// TestTakeover100Ports: the same swap on a host with 100 VM ports (one
// VXLAN network): ovs-agent in sync within 2 s of its start is the goal;
// the time is logged, and ping/TCP between two of them must not notice.
func TestTakeover100Ports(t *testing.T) {
	e := NewEnv(t)
	dir, ini, metrics := takeoverFiles(t)
	if _, err := AgentBinary(); err != nil { // built now, not on the swap's clock
		t.Fatal(err)
	}
	nw := e.Network(NetworkSpec{Name: "vx100", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.10.0/24")
	// The reference agent first, alive, then the ports: the server binds a
	// port to a host only while an agent of that host is alive (on a fresh
	// machine no agent of this host ever was).
	before := startedAt(e)
	ref := startRefAgent(t, dir, ini)
	waitRefWired(t, e, ref, before, nil, 240*time.Second)
	const n = 100
	vms, ports := plugPorts(t, e, nw, n, "p")
	t.Logf("%d ports created and plugged", n)

	waitRefWired(t, e, ref, before, ports, 400*time.Second)
	vm1, vm2 := vms[0], vms[1]
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	sess := echoSession(t, vm1, vm2, 5009)
	refCookies, _ := flowCookies(e.Ctx, e.OVS, takeoverBridges...)
	t.Logf("reference flows by cookie: %v", refCookies)
	pinger, err := vm1.StartPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	watch := e.watchStatusEvery(200*time.Millisecond, ports)
	time.Sleep(time.Second)
	took, killed := ref.Stop(20 * time.Second)
	t.Logf("reference agent stopped after %s (SIGKILL: %v)", took, killed)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	a := startOurs(t, e, ini, metrics)
	r := waitSwapped(t, e, start, refCookies, a, 120*time.Second)
	met := "met"
	if r.syncAfter > 2*time.Second || r.cleanAfter > 2*time.Second {
		met = "NOT met"
	}
	t.Logf("100 PORTS: ovs-agent in sync %s after start, reference cookies gone after %s (goal 2 s: %s)", r.syncAfter, r.cleanAfter, met)
	t.Logf("100 PORTS: agent timings: %s", timingMetrics(e.Ctx, a))
	time.Sleep(3 * time.Second)
	st := pinger.Stop()
	polls, _, changes := watch.Stop()
	sent, got, maxRTT, failures := sess.Stop()
	t.Logf("ping: sent %d received %d lost %d; TCP: %d/%d echoed, max RTT %s; status polls %d, non-ACTIVE %d", st.Sent, st.Received, st.Lost(), got, sent, maxRTT, polls, len(changes))
	if st.Lost() != 0 {
		t.Errorf("ping lost %d of %d", st.Lost(), st.Sent)
	}
	if len(failures) > 0 {
		t.Errorf("TCP session: %v", failures)
	}
	if len(changes) > 0 {
		t.Errorf("ports left ACTIVE: %v", head(changes, 10))
	}
	if wired, err := a.Metric(e.Ctx, "ovsagent_ports_wired"); err != nil || wired != n {
		t.Errorf("ovsagent_ports_wired = %v (%v), want %d", wired, err, n)
	}
	now, _ := flowCookies(e.Ctx, e.OVS, takeoverBridges...)
	for c := range refCookies {
		if now[c] > 0 {
			t.Errorf("%d flows still carry the reference's cookie %s", now[c], c)
		}
	}
	out, dn := dryRun(t, e, a)
	t.Logf("dry run after takeover: add/modify/remove %v\n%s", dn, lastLines(out, 6))
	if dn != [3]int{0, 0, 0} {
		t.Errorf("dry run after the takeover wants add/modify/remove %v", dn)
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
