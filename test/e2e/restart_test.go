//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

var agentBridges = []string{"br-int", "br-tun", "br-phys"}

// restartSetup wires a VXLAN network with two VMs and a VLAN network with
// one (so that br-phys carries port flows too), waits until they are ACTIVE,
// ping, and the agent reports /healthz 200.
func restartSetup(t *testing.T, e *Env) (agent *Agent, vm1, vm2, vlanVM *VM) {
	t.Helper()
	agent, took := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	t.Logf("agent alive %s after start", took)
	nw := e.Network(NetworkSpec{Name: "vx", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.30.0/24")
	vlan := e.ProviderVLANNetwork("vlan", "physnet1", 101)
	e.Subnet(vlan.ID, "10.250.31.0/24")
	vm1, vm2, vlanVM = e.VM(nw, "vm1"), e.VM(nw, "vm2"), e.VM(vlan, "vlanvm")
	for _, vm := range []*VM{vm1, vm2, vlanVM} {
		e.WaitStatus(vm.Port, "ACTIVE", 60*time.Second)
	}
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitFor(e.Ctx, 30*time.Second, func() error { return healthy(e, agent) }); err != nil {
		t.Fatalf("healthz before the restart: %v", err)
	}
	return agent, vm1, vm2, vlanVM
}

func healthy(e *Env, a *Agent) error {
	code, err := a.Healthz(e.Ctx)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("/healthz %d", code)
	}
	return nil
}

// flowSets dumps the flow sets (without cookies) of the agent's bridges.
func flowSets(t *testing.T, e *Env) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	for _, br := range agentBridges {
		fs, err := e.OVS.FlowSet(e.Ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		m[br] = fs
	}
	return m
}

// stableFlowSets waits until two dumps a second apart agree (l2pop and
// security group updates may still trickle in) and returns the last one.
func stableFlowSets(t *testing.T, e *Env) map[string][]string {
	t.Helper()
	prev := flowSets(t, e)
	for i := 0; i < 20; i++ {
		time.Sleep(time.Second)
		cur := flowSets(t, e)
		same := true
		for _, br := range agentBridges {
			if len(diffSets(prev[br], cur[br])) > 0 {
				same = false
			}
		}
		if same {
			return cur
		}
		prev = cur
	}
	t.Logf("flows still changing after 20 s; comparing with the last dump")
	return prev
}

// onlyCookies checks that every flow of every bridge carries the cookie the
// agent's current run announced for that bridge.
func onlyCookies(e *Env, a *Agent) error {
	want := a.Cookies()
	for _, br := range agentBridges {
		c, err := flowCookies(e.Ctx, e.OVS, br)
		if err != nil {
			return err
		}
		if want[br] == "" {
			return fmt.Errorf("%s: no cookie announced in the log yet", br)
		}
		for ck, n := range c {
			if ck != want[br] {
				return fmt.Errorf("%s: %d flows with cookie %s (this run's: %s)", br, n, ck, want[br])
			}
		}
	}
	return nil
}

func compareFlowSets(t *testing.T, what string, before, after map[string][]string) {
	t.Helper()
	for _, br := range agentBridges {
		if d := diffSets(before[br], after[br]); len(d) > 0 {
			t.Errorf("%s: %s flows differ (- before, + after):\n%s", what, br, strings.Join(d, "\n"))
		} else {
			t.Logf("%s: %s: the same %d flows", what, br, len(after[br]))
		}
	}
}

// TestRestartKill9: with ping -i 0.1 running between two VMs, the agent is
// killed with SIGKILL and started again. No ping is lost, no port shows
// anything but ACTIVE in the API, the new run sends few update_device_list
// calls (no storm), keeps its predecessor's cookies (so it re-sends only what
// changed), and once in sync every flow carries that cookie and the flow set
// is the one the first run computed. Then SIGTERM
// stops the agent within 5 s with the dataplane intact.
func TestRestartKill9(t *testing.T) {
	e := NewEnv(t)
	agent, vm1, vm2, vlanVM := restartSetup(t, e)
	before := stableFlowSets(t, e)
	oldCookies := agent.Cookies()
	if err := onlyCookies(e, agent); err != nil {
		t.Errorf("before the restart: %v", err)
	}

	pinger, err := vm1.StartTimedPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	watch := e.WatchStatus(vm1.Port, vm2.Port, vlanVM.Port)
	time.Sleep(time.Second)

	killedAt := time.Now()
	if err := agent.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent killed (SIGKILL)")
	time.Sleep(2 * time.Second) // the dataplane alone
	startAt := time.Now()
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent started again, pid %d (%s after the kill)", agent.Pid(), startAt.Sub(killedAt).Round(time.Millisecond))

	dh, err := WaitFor(e.Ctx, 60*time.Second, func() error {
		select {
		case <-agent.Exited():
			return fmt.Errorf("agent exited: %v", agent.ExitErr())
		default:
		}
		return healthy(e, agent)
	})
	if err != nil {
		t.Fatalf("restart: not healthy within %s: %v", dh, err)
	}
	dc, err := WaitFor(e.Ctx, 60*time.Second, func() error {
		// the new run announces each bridge's cookie once it connected
		if n := agent.BridgeConnects(); n < 2*len(agentBridges) {
			return fmt.Errorf("%d bridge connections announced in the log, want %d (both runs)", n, 2*len(agentBridges))
		}
		return onlyCookies(e, agent)
	})
	if err != nil {
		t.Errorf("restart: stale flows %s after start: %v", dc, err)
	}
	// The new run recognises its predecessor's flows and keeps their cookie:
	// its first bundle carries only what changed, not every flow re-cookied.
	newCookies := agent.Cookies()
	for _, br := range agentBridges {
		if newCookies[br] != oldCookies[br] {
			t.Errorf("%s: the new run took cookie %s instead of keeping %s", br, newCookies[br], oldCookies[br])
		}
	}
	t.Logf("restart: /healthz 200 %s after start; every flow on this run's cookie %s after start (%v -> %v)",
		dh.Round(time.Millisecond), (time.Since(startAt)).Round(time.Millisecond), oldCookies, newCookies)

	time.Sleep(3 * time.Second) // reports and status updates of the new run
	rep := pinger.Stop()
	polls, perrs, flaps := watch.Stop()
	if rep.Sent < 50 || rep.Lost() != 0 {
		t.Errorf("restart: ping %d sent, %d lost (longest gap %s)", rep.Sent, rep.Lost(), rep.MaxGap)
	}
	t.Logf("restart: ping -i 0.1 across kill+start: %d sent, %d lost, longest gap between replies %s",
		rep.Sent, rep.Lost(), rep.MaxGap.Round(time.Millisecond))
	if len(flaps) > 0 {
		t.Errorf("restart: ports not ACTIVE in the API: %s", strings.Join(flaps, "; "))
	}
	t.Logf("restart: port status polled %d times (%d errors), %d non-ACTIVE", polls, perrs, len(flaps))

	calls, cerr := agent.Metric(e.Ctx, "ovsagent_update_device_list_calls_total")
	rpcs, rerr := agent.Metric(e.Ctx, `ovsagent_rpc_duration_seconds_count{method="update_device_list"}`)
	t.Logf("restart: the new run sent %v update_device_list batches (%v), %v RPC calls (%v) for 3 ports", calls, cerr, rpcs, rerr)
	if cerr == nil && calls > 3 {
		t.Errorf("restart: %v update_device_list batches for 3 ports", calls)
	}
	if rerr == nil && rpcs > 3 {
		t.Errorf("restart: %v update_device_list calls for 3 ports", rpcs)
	}
	if err := healthy(e, agent); err != nil {
		t.Errorf("restart: %v", err)
	}
	after := flowSets(t, e)
	compareFlowSets(t, "restart", before, after)

	// SIGTERM: a clean exit within 5 s, flows and traffic kept.
	pinger2, err := vm1.StartTimedPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	took, killed, err := agent.Stop(5 * time.Second)
	if err != nil || killed || agent.ExitErr() != nil {
		t.Errorf("SIGTERM: took %s killed=%v err=%v exit=%v", took, killed, err, agent.ExitErr())
	}
	t.Logf("SIGTERM: exited %s after the signal (exit %v)", took.Round(time.Millisecond), agent.ExitErr())
	time.Sleep(2 * time.Second)
	rep2 := pinger2.Stop()
	if rep2.Sent < 20 || rep2.Lost() != 0 {
		t.Errorf("SIGTERM: ping across the stop: %d sent, %d lost (icmp_seq %v)", rep2.Sent, rep2.Lost(), rep2.Missing)
	}
	t.Logf("SIGTERM: ping across the stop: %d sent, %d lost", rep2.Sent, rep2.Lost())
	compareFlowSets(t, "after SIGTERM", after, flowSets(t, e))
}

// TestRestartVswitchd: the system ovs-vswitchd is killed (SIGKILL) and
// started again without its flows (ovs-ctl --no-ovsdb-server start). The
// agent notices (OpenFlow reconnect, canary table 23 gone) and restores
// every bridge: traffic between the VMs resumes (measured with ping -i 0.1;
// the goal is within 2 s of ovs-vswitchd being back), the canary and the
// same flows are back, and no port leaves ACTIVE in the API.
func TestRestartVswitchd(t *testing.T) {
	ovsRestartCase(t, func(e *Env) (time.Time, time.Time, error) {
		oldPid, newPid, killedAt, startedAt, err := KillStartVswitchd(e.Ctx)
		if err == nil {
			t.Logf("ovs-vswitchd pid %d killed; pid %d started by ovs-ctl %s later", oldPid, newPid, startedAt.Sub(killedAt).Round(time.Millisecond))
		}
		return killedAt, startedAt, err
	})
}

// TestRestartOVSCtl: "ovs-ctl restart", what a package upgrade does:
// ovsdb-server and ovs-vswitchd restarted, the flows saved and restored by
// ovs-ctl (flow-restore-wait). The agent reconnects to both, resyncs, and
// the same checks hold.
func TestRestartOVSCtl(t *testing.T) {
	ovsRestartCase(t, func(e *Env) (time.Time, time.Time, error) {
		oldPid, err := VswitchdPid()
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		stoppedAt := time.Now()
		out, err := exec.CommandContext(e.Ctx, "setsid", "/usr/share/openvswitch/scripts/ovs-ctl", "restart").CombinedOutput()
		startedAt := time.Now()
		if err != nil {
			return stoppedAt, startedAt, fmt.Errorf("ovs-ctl restart: %w: %s", err, out)
		}
		newPid, err := VswitchdPid()
		t.Logf("ovs-ctl restart took %s; ovs-vswitchd pid %d -> %d", startedAt.Sub(stoppedAt).Round(time.Millisecond), oldPid, newPid)
		return stoppedAt, startedAt, err
	})
}

// ovsRestartCase runs the checks around an Open vSwitch restart done by
// restart, which returns when it began and when the daemons were back.
func ovsRestartCase(t *testing.T, restart func(e *Env) (downAt, upAt time.Time, err error)) {
	e := NewEnv(t)
	agent, vm1, vm2, vlanVM := restartSetup(t, e)
	before := stableFlowSets(t, e)
	canary := func() error {
		flows, err := e.OVS.DumpFlows(e.Ctx, "br-int")
		if err != nil {
			return err
		}
		for _, f := range flows {
			if strings.Contains(f, "table=23") {
				return nil
			}
		}
		return fmt.Errorf("no canary flow in br-int table 23")
	}
	if err := canary(); err != nil {
		t.Fatalf("before: %v", err)
	}
	resyncs0, _ := agent.Metric(e.Ctx, "ovsagent_resyncs_total")

	pinger, err := vm1.StartTimedPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	watch := e.WatchStatus(vm1.Port, vm2.Port, vlanVM.Port)
	time.Sleep(time.Second)
	downAt, upAt, err := restart(e)
	if err != nil {
		pinger.Stop()
		watch.Stop()
		t.Fatalf("restart: %v", err)
	}

	d, err := WaitFor(e.Ctx, 60*time.Second, func() error {
		if pinger.FirstReplyAfter(upAt).IsZero() {
			return fmt.Errorf("no ping reply since Open vSwitch was back")
		}
		return nil
	})
	if err != nil {
		t.Errorf("traffic not back %s after Open vSwitch was back: %v", d, err)
	}
	_, ferr := WaitFor(e.Ctx, 60*time.Second, func() error {
		if err := canary(); err != nil {
			return err
		}
		for _, br := range agentBridges {
			fs, err := e.OVS.FlowSet(e.Ctx, br)
			if err != nil {
				return err
			}
			if len(fs) != len(before[br]) {
				return fmt.Errorf("%s: %d flows, %d before", br, len(fs), len(before[br]))
			}
		}
		return nil
	})
	flowsBack := time.Since(upAt)
	if ferr != nil {
		t.Errorf("flows not restored: %v", ferr)
	}
	time.Sleep(3 * time.Second)
	rep := pinger.Stop()
	polls, perrs, flaps := watch.Stop()
	if rep.MaxGap > 0 {
		// The outage is the longest gap between two replies; it ends with
		// the first reply after Open vSwitch came back.
		backAfterUp := rep.MaxGapAfter.Sub(upAt)
		goal := "met"
		if backAfterUp > 2*time.Second {
			goal = "MISSED"
		}
		t.Logf("ovs restart: traffic back %s after Open vSwitch was back (goal <= 2 s: %s); outage (longest gap between replies) %s, from %s after the restart began",
			backAfterUp.Round(time.Millisecond), goal, rep.MaxGap.Round(time.Millisecond), rep.LastBefore.Sub(downAt).Round(time.Millisecond))
		// The goal is 2 s; the machine is loaded, so only 5x that fails
		// (a wipe found by report_interval's canary took 19-30 s).
		if backAfterUp > 10*time.Second {
			t.Errorf("ovs restart: traffic back only %s after Open vSwitch was back", backAfterUp.Round(time.Millisecond))
		}
	}
	t.Logf("ovs restart: ping -i 0.1: %d sent, %d lost; flows back (canary + counts) %s after Open vSwitch was back",
		rep.Sent, rep.Lost(), flowsBack.Round(time.Millisecond))
	if len(flaps) > 0 {
		t.Errorf("ovs restart: ports not ACTIVE in the API: %s", strings.Join(flaps, "; "))
	}
	t.Logf("ovs restart: port status polled %d times (%d errors), %d non-ACTIVE", polls, perrs, len(flaps))
	if _, err := WaitFor(e.Ctx, 30*time.Second, func() error { return healthy(e, agent) }); err != nil {
		t.Errorf("ovs restart: %v", err)
	}
	resyncs, _ := agent.Metric(e.Ctx, "ovsagent_resyncs_total")
	t.Logf("ovs restart: resyncs %v -> %v", resyncs0, resyncs)
	compareFlowSets(t, "ovs restart", before, flowSets(t, e))
	if st, err := vm2.Ping(e.Ctx, vm1.IP, 10); err != nil || st.Lost() != 0 {
		t.Errorf("ovs restart: vm2 -> vm1 afterwards: %+v %v", st, err)
	}
}

// BridgeConnects counts the "openflow: bridge connected" lines of every run
// of the agent in its log.
func (a *Agent) BridgeConnects() int {
	return len(bridgeCookieLine.FindAllString(a.Log(), -1))
}
