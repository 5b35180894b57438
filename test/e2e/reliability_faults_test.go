//go:build e2e

package e2e

// Faults from outside the agent: RabbitMQ restarted or cut off, ovsdb-server
// restarted, AMQP over TLS, and isolation between tenants' networks.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// brokerBounce runs rabbitmqctl stop_app, waits down, and start_app; it
// returns when the broker accepts connections again.
func brokerBounce(t *testing.T, e *Env, node string, down time.Duration) (stoppedAt, upAt time.Time) {
	t.Helper()
	stoppedAt = time.Now()
	if _, err := rabbitmqctl(e.Ctx, node, "stop_app"); err != nil {
		t.Fatalf("stop_app: %v", err)
	}
	t.Cleanup(func() { // never leave the machine without a broker
		ctx, cancel := cleanupCtx()
		defer cancel()
		_, _ = rabbitmqctl(ctx, node, "start_app")
	})
	time.Sleep(down)
	if _, err := rabbitmqctl(e.Ctx, node, "start_app"); err != nil {
		t.Fatalf("start_app: %v", err)
	}
	if _, ok := waitFor(e.Ctx, 60*time.Second, func() bool {
		_, err := sh(e.Ctx, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/5672")
		return err == nil
	}); !ok {
		t.Fatal("RabbitMQ not listening 60 s after start_app")
	}
	return stoppedAt, time.Now()
}

var reconnectLine = regexp.MustCompile(`oslo: connected.*reconnect=true`)

// TestReliabBrokerRestart: RabbitMQ restarted (stop_app/start_app) once
// while idle and once while 50 ports are being plugged: the agent
// reconnects and resyncs, every port ends ACTIVE, pings between the
// existing VMs never stop, no stale flow; neutron-server recovers too (its
// API answers and it sees the agent alive).
func TestReliabBrokerRestart(t *testing.T) {
	e := NewEnv(t)
	node, err := rabbitNode(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	agent, took := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	t.Logf("agent alive after %s; broker node %s", took, node)
	nw := e.Network(NetworkSpec{Name: "rmq", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.34.0/24")
	vm1, vm2 := e.VM(nw, "vm1"), e.VM(nw, "vm2")
	e.WaitStatus(vm1.Port, "ACTIVE", 60*time.Second)
	e.WaitStatus(vm2.Port, "ACTIVE", 60*time.Second)
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	const n = 50
	bulk := e.bulkPorts(nw, "b", n) // created before: the API needs the broker for nothing here, but keep the bounce short
	ids := map[string]bool{vm1.Port.ID: true, vm2.Port.ID: true}
	for _, b := range bulk {
		ids[b.Port.ID] = true
	}
	pinger, err := vm1.StartTimedPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			pinger.Stop()
		}
	}()

	for round, busy := range []bool{false, true} {
		reconnects := len(logLines(agent, reconnectLine))
		var plugErr chan error
		if busy {
			plugErr = make(chan error, 1)
			go func() { plugErr <- plugAll(e.Ctx, e.OVS, bulk, 2) }()
			time.Sleep(1500 * time.Millisecond) // some plugged and wired, most not
		}
		wired, _ := agent.Metric(e.Ctx, "ovsagent_ports_wired")
		downAt, upAt := brokerBounce(t, e, node, 3*time.Second)
		d, ok := waitFor(e.Ctx, 120*time.Second, func() bool { return len(logLines(agent, reconnectLine)) > reconnects })
		t.Logf("round %d (busy=%v): broker down %s (ports_wired %v when stopped); agent reconnected %s after start_app: %v",
			round, busy, upAt.Sub(downAt).Round(time.Millisecond), wired, d.Round(time.Millisecond), ok)
		if !ok {
			t.Fatalf("agent did not reconnect:\n%s", agent.LogTail(30))
		}
		// neutron-server: API answers, and it sees the agent report again
		apiD, apiOK := waitFor(e.Ctx, 120*time.Second, func() bool {
			_, err := e.Neutron.ListNetworks(e.Ctx, url.Values{"limit": {"1"}})
			return err == nil
		})
		t.Logf("round %d: neutron API answering %s after start_app: %v", round, apiD.Round(time.Millisecond), apiOK)
		if busy {
			if err := <-plugErr; err != nil {
				t.Fatal(err)
			}
			var st map[string]int
			var off []string
			d, ok := waitFor(e.Ctx, 300*time.Second, func() bool {
				st, off, err = e.portStatuses(e.Ctx, nw.ID, ids, "ACTIVE")
				return err == nil && len(off) == 0 && st["ACTIVE"] == n+2
			})
			t.Logf("round %d: all %d ports ACTIVE %s after start_app: %v %v", round, n+2, (time.Since(upAt)).Round(time.Millisecond), ok, st)
			_ = d
			if !ok {
				t.Errorf("not ACTIVE: %v", firstN(off, 10))
			}
		}
		var stale []string
		d, ok = waitFor(e.Ctx, 60*time.Second, func() bool {
			stale, err = staleFlows(e.Ctx, e.OVS, agent)
			return err == nil && len(stale) == 0
		})
		if !ok {
			t.Errorf("round %d: stale flows: %v", round, firstN(stale, 10))
		}
		before, _ := e.Neutron.OVSAgent(e.Ctx, "hv1")
		d, ok = waitFor(e.Ctx, 120*time.Second, func() bool {
			ai, err := e.Neutron.OVSAgent(e.Ctx, "hv1")
			return err == nil && ai != nil && ai.Alive && (before == nil || ai.HeartbeatTimestamp != before.HeartbeatTimestamp)
		})
		t.Logf("round %d: neutron sees a new heartbeat of hv1 %s later: %v", round, d.Round(time.Millisecond), ok)
		if !ok {
			t.Errorf("round %d: no new report_state accepted by neutron-server", round)
		}
	}
	if res, err := agent.Metric(e.Ctx, `ovsagent_resyncs_total{reason="broker-reconnect"}`); err != nil || res < 2 {
		t.Errorf("resyncs after broker reconnect: %v %v, want >= 2", res, err)
	}
	rep := pinger.Stop()
	stopped = true
	t.Logf("ping vm1 -> vm2 across two broker restarts: sent %d, lost %d, longest gap %s", rep.Sent, rep.Lost(), rep.MaxGap)
	if rep.Lost() > 0 {
		t.Errorf("pings lost: %+v", rep.PingStats)
	}
}

// freePort returns a free 127.0.0.1 TCP port.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestReliabServerUnreachable: the agent reaches RabbitMQ (hence
// neutron-server) through a relay that the test stops for 30 s — a network
// partition between the agent and the broker, with the server itself up
// (TestReliabServerStopped stops the real server for 2 minutes): the
// dataplane is untouched meanwhile (pings go on), a VM plugged meanwhile is
// wired once the path is back, and the agent reports its state again.
func TestReliabServerUnreachable(t *testing.T) {
	e := NewEnv(t)
	port := freePort(t)
	relay := StartDaemon(t, "socat", fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1,fork,reuseaddr", port), "TCP:127.0.0.1:5672")
	agent, took := e.StartAgentAlive(AgentConfig{TransportURL: TransportVia(port, "", "")}, 90*time.Second)
	t.Logf("agent alive through the relay on :%d after %s", port, took)
	nw := e.Network(NetworkSpec{Name: "outage", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.35.0/24")
	vm1, vm2 := e.VM(nw, "vm1"), e.VM(nw, "vm2")
	e.WaitStatus(vm1.Port, "ACTIVE", 60*time.Second)
	e.WaitStatus(vm2.Port, "ACTIVE", 60*time.Second)
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	flowsBefore := map[string][]string{}
	for _, br := range []string{"br-int", "br-tun"} {
		fs, err := e.OVS.FlowSet(e.Ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		flowsBefore[br] = fs
	}
	pinger, err := vm1.StartTimedPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			pinger.Stop()
		}
	}()
	reconnects := len(logLines(agent, reconnectLine))
	downAt := time.Now()
	relay.Stop()
	const outage = 30 * time.Second
	time.Sleep(3 * time.Second)
	vm3 := e.VM(nw, "vm3") // plugged while the server is unreachable
	time.Sleep(outage - 3*time.Second)
	// during the outage: nothing changed in the dataplane, vm3 not ACTIVE
	if p, err := e.Neutron.GetPort(e.Ctx, vm3.Port.ID); err == nil && p.Status == "ACTIVE" {
		t.Errorf("vm3 ACTIVE while the agent cannot reach the server")
	}
	for br, fs := range flowsBefore {
		now, _ := e.OVS.FlowSet(e.Ctx, br)
		d := diffSets(fs, now)
		var removed []string
		for _, l := range d {
			if strings.HasPrefix(l, "- ") && !(strings.Contains(l, "table=20") && strings.Contains(l, "hard_timeout")) {
				removed = append(removed, l)
			}
		}
		t.Logf("%s during the outage: %d flows, %d of those before removed", br, len(now), len(removed))
		if len(removed) > 0 {
			t.Errorf("%s: flows removed while the server was unreachable: %v", br, firstN(removed, 5))
		}
	}
	ai, _ := e.Neutron.OVSAgent(e.Ctx, "hv1")
	t.Logf("after %s without the server: agent process alive=%v, neutron says alive=%v", time.Since(downAt).Round(time.Second), agent.Pid() != 0, ai != nil && ai.Alive)
	if agent.Pid() == 0 {
		t.Fatalf("agent exited during the outage: %v", agent.ExitErr())
	}
	upAt := time.Now()
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	d, ok := waitFor(e.Ctx, 120*time.Second, func() bool { return len(logLines(agent, reconnectLine)) > reconnects })
	t.Logf("relay back after %s down; agent reconnected %s later: %v", upAt.Sub(downAt).Round(time.Second), d.Round(time.Millisecond), ok)
	if !ok {
		t.Fatalf("agent did not reconnect:\n%s", agent.LogTail(30))
	}
	t.Logf("vm3 (plugged during the outage) ACTIVE %s after the relay came back", e.WaitStatus(vm3.Port, "ACTIVE", 180*time.Second)+d)
	if _, err := vm3.PingUntil(e.Ctx, vm1.IP, 30*time.Second); err != nil {
		t.Error(err)
	}
	before := ai
	d, ok = waitFor(e.Ctx, 120*time.Second, func() bool {
		ai, err := e.Neutron.OVSAgent(e.Ctx, "hv1")
		return err == nil && ai != nil && ai.Alive && (before == nil || ai.HeartbeatTimestamp != before.HeartbeatTimestamp)
	})
	t.Logf("neutron sees hv1 alive with a new heartbeat %s after the relay came back: %v", (time.Since(upAt)).Round(time.Millisecond), ok)
	if !ok {
		t.Error("state not reported again")
	}
	rep := pinger.Stop()
	stopped = true
	t.Logf("ping vm1 -> vm2 across %s without the server: sent %d, lost %d, longest gap %s", outage, rep.Sent, rep.Lost(), rep.MaxGap)
	if rep.Lost() > 0 {
		t.Errorf("pings lost: %+v", rep.PingStats)
	}
}

// TestReliabRuleDeletedWhileUnreachable: a security group rule deleted while
// the agent cannot reach the broker (a relay stopped, as in
// TestReliabServerUnreachable) long enough for its fanout queues to expire
// (rabbit_transient_queues_ttl 5 s): the server's push of the deletion has no
// queue of this agent to go to and is lost. After the reconnect the agent
// re-reads its cache, and the rule stops being enforced (a real TCP
// connection); the group's other rule still is. Without that re-read the rule
// stayed allowed until the agent restarted.
func TestReliabRuleDeletedWhileUnreachable(t *testing.T) {
	e := NewEnv(t)
	port := freePort(t)
	relay := StartDaemon(t, "socat", fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1,fork,reuseaddr", port), "TCP:127.0.0.1:5672")
	agent, took := e.StartAgentAlive(AgentConfig{TransportURL: TransportVia(port, "", ""),
		Set: map[string]map[string]string{"oslo_messaging_rabbit": {"rabbit_transient_queues_ttl": "5"}}}, 90*time.Second)
	t.Logf("agent alive through the relay on :%d after %s", port, took)
	nw := e.Network(NetworkSpec{Name: "lostpush", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.39.0/24")
	client := e.SecurityGroup("client")
	srvSG := e.SecurityGroup("server")
	e.Rule(RuleSpec{SecurityGroupID: srvSG.ID, Protocol: "icmp", RemoteIPPrefix: "0.0.0.0/0"})
	tcpRule := e.Rule(RuleSpec{SecurityGroupID: srvSG.ID, Protocol: "tcp", PortMin: 5039, PortMax: 5039, RemoteIPPrefix: "0.0.0.0/0"})
	vm1 := e.sgVmAt(nw, "client", "10.250.39.11", func(s *PortSpec) { s.SecurityGroups = []string{client.ID} })
	vm2 := e.sgVmAt(nw, "server", "10.250.39.12", func(s *PortSpec) { s.SecurityGroups = []string{srvSG.ID} })
	e.sgWaitActive(vm1, vm2)
	sgServe(t, vm2, 5039)
	sgEventually(t, sgConverge, "tcp 5039 allowed before the outage", func() error { return vm1.TCPEcho(e.Ctx, vm2.IP, 5039) })
	if t.Failed() {
		t.FailNow()
	}

	reconnects := len(logLines(agent, reconnectLine))
	resyncs, _ := agent.Metric(e.Ctx, `ovsagent_resyncs_total{reason="broker-reconnect"}`)
	relay.Stop()
	time.Sleep(15 * time.Second) // the agent's queues expire 5 s after their consumers left
	if err := e.Neutron.DeleteSecurityGroupRule(e.Ctx, tcpRule.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // the push goes out, to no queue of the agent's
	if err := vm1.TCPEcho(e.Ctx, vm2.IP, 5039); err != nil {
		t.Logf("tcp 5039 already blocked while the agent was cut off: %v", err)
	}
	upAt := time.Now()
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	d, ok := waitFor(e.Ctx, 120*time.Second, func() bool { return len(logLines(agent, reconnectLine)) > reconnects })
	t.Logf("agent reconnected %s after the relay came back: %v", d.Round(time.Millisecond), ok)
	if !ok {
		t.Fatalf("agent did not reconnect:\n%s", agent.LogTail(30))
	}
	if sgEventually(t, sgConverge, "tcp 5039 blocked after the reconnect (its rule deleted during the outage)", func() error {
		return sgTcpBlocked(e.Ctx, vm1, vm2.IP, 5039)
	}) < sgConverge {
		t.Logf("rule deleted during the outage enforced no more %s after the relay came back", time.Since(upAt).Round(time.Millisecond))
	}
	if err := sgPingOK(e.Ctx, vm1, vm2.IP, 3); err != nil {
		t.Errorf("the group's other rule (icmp) lost: %v", err)
	}
	if n, err := agent.Metric(e.Ctx, `ovsagent_resyncs_total{reason="broker-reconnect"}`); err != nil || n <= resyncs {
		t.Errorf("broker-reconnect resyncs %v (before %v): %v", n, resyncs, err)
	}
	if l := logLines(agent, regexp.MustCompile(`cached server objects re-read`)); len(l) == 0 {
		t.Errorf("no cache re-read logged:\n%s", agent.LogTail(40))
	} else {
		t.Logf("%s", l[len(l)-1])
	}
}

// TestReliabOVSDBRestart: ovsdb-server alone restarted (ovs-ctl
// --no-ovs-vswitchd stop/start): the agent reconnects and resyncs, pings go
// on, a VM plugged after it is wired, no stale flow.
func TestReliabOVSDBRestart(t *testing.T) {
	e := NewEnv(t)
	agent, took := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	t.Logf("agent alive after %s", took)
	nw := e.Network(NetworkSpec{Name: "ovsdb", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.36.0/24")
	vm1, vm2 := e.VM(nw, "vm1"), e.VM(nw, "vm2")
	e.WaitStatus(vm1.Port, "ACTIVE", 60*time.Second)
	e.WaitStatus(vm2.Port, "ACTIVE", 60*time.Second)
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	pinger, err := vm1.StartTimedPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			pinger.Stop()
		}
	}()
	resyncs0, _ := agent.Metric(e.Ctx, `ovsagent_resyncs_total{reason="ovsdb-reconnect"}`)
	ctl := "/usr/share/openvswitch/scripts/ovs-ctl"
	downAt := time.Now()
	if out, err := exec.CommandContext(e.Ctx, "setsid", ctl, "--no-ovs-vswitchd", "stop").CombinedOutput(); err != nil {
		t.Fatalf("ovs-ctl stop: %v %s", err, out)
	}
	t.Cleanup(func() {
		if _, err := (OVS{}).Vsctl(context.Background(), "show"); err != nil {
			_ = exec.Command("setsid", ctl, "--no-ovs-vswitchd", "start").Run()
		}
	})
	time.Sleep(2 * time.Second)
	if out, err := exec.CommandContext(e.Ctx, "setsid", ctl, "--no-ovs-vswitchd", "start").CombinedOutput(); err != nil {
		t.Fatalf("ovs-ctl start: %v %s", err, out)
	}
	upAt := time.Now()
	var res float64
	d, ok := waitFor(e.Ctx, 60*time.Second, func() bool {
		res, _ = agent.Metric(e.Ctx, `ovsagent_resyncs_total{reason="ovsdb-reconnect"}`)
		return res > resyncs0
	})
	t.Logf("ovsdb-server down %s; agent resynced (ovsdb-reconnect %v -> %v) %s after it was back: %v", upAt.Sub(downAt).Round(time.Millisecond), resyncs0, res, d.Round(time.Millisecond), ok)
	if !ok {
		t.Errorf("no resync after the ovsdb-server restart")
	}
	vm3 := e.VM(nw, "vm3")
	t.Logf("vm3 plugged after the restart ACTIVE %s later", e.WaitStatus(vm3.Port, "ACTIVE", 60*time.Second))
	if _, err := vm3.PingUntil(e.Ctx, vm1.IP, 30*time.Second); err != nil {
		t.Error(err)
	}
	var stale []string
	if _, ok := waitFor(e.Ctx, 60*time.Second, func() bool {
		stale, err = staleFlows(e.Ctx, e.OVS, agent)
		return err == nil && len(stale) == 0
	}); !ok {
		t.Errorf("stale flows: %v", firstN(stale, 10))
	}
	rep := pinger.Stop()
	stopped = true
	t.Logf("ping vm1 -> vm2 across the ovsdb-server restart: sent %d, lost %d, longest gap %s", rep.Sent, rep.Lost(), rep.MaxGap)
	if rep.Lost() > 0 {
		t.Errorf("pings lost: %+v", rep.PingStats)
	}
}

// makeCA writes a CA and a server certificate for 127.0.0.1 signed by it
// into dir/<name>-ca.pem, <name>-server.pem, <name>-server.key.
func makeCA(t *testing.T, dir, name string) (ca, cert, key string) {
	t.Helper()
	ca, cert, key = dir+"/"+name+"-ca.pem", dir+"/"+name+"-server.pem", dir+"/"+name+"-server.key"
	caKey, csr, ext := dir+"/"+name+"-ca.key", dir+"/"+name+"-server.csr", dir+"/"+name+"-ext.cnf"
	if err := os.WriteFile(ext, []byte("subjectAltName=IP:127.0.0.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", caKey, "-out", ca, "-days", "2", "-subj", "/CN=ovsagent e2e " + name + " CA"},
		{"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"},
		{"openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext},
	} {
		if _, err := sh(t.Context(), c[0], c[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}

// TestReliabTLSAndPasswords: RabbitMQ behind a TLS listener on 127.0.0.1
// (socat with a certificate of a CA the test generated), a RabbitMQ user with
// a password of its own: the agent connects with ssl = True and the CA, a
// second run with another CA is refused (the log says why), and the password
// appears in no log line, nor in /metrics.
func TestReliabTLSAndPasswords(t *testing.T) {
	e := NewEnv(t)
	node, err := rabbitNode(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	user, pass := "e2e-rel-"+newUUID()[:8], "Pw-"+strings.ReplaceAll(newUUID(), "-", "")
	if _, err := rabbitmqctl(e.Ctx, node, "add_user", user, pass); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		_, _ = rabbitmqctl(ctx, node, "delete_user", user)
	})
	if _, err := rabbitmqctl(e.Ctx, node, "set_permissions", "-p", TransportVHost(), user, ".*", ".*", ".*"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca, cert, key := makeCA(t, dir, "good")
	wrongCA, _, _ := makeCA(t, dir, "wrong")
	port := freePort(t)
	StartDaemon(t, "socat", fmt.Sprintf("OPENSSL-LISTEN:%d,bind=127.0.0.1,fork,reuseaddr,cert=%s,key=%s,verify=0", port, cert, key), "TCP:127.0.0.1:5672")
	if _, ok := waitFor(e.Ctx, 10*time.Second, func() bool {
		_, err := sh(e.Ctx, "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port))
		return err == nil
	}); !ok {
		t.Fatal("TLS relay not listening")
	}
	url := TransportVia(port, user, pass)
	tlsCfg := func(caFile string) AgentConfig {
		return AgentConfig{TransportURL: url, Debug: true,
			Set: map[string]map[string]string{"oslo_messaging_rabbit": {"ssl": "True", "ssl_ca_file": caFile}}}
	}
	agent, took := e.StartAgentAlive(tlsCfg(ca), 90*time.Second)
	t.Logf("agent alive over TLS (relay :%d, user %s) after %s", port, user, took)
	nw := e.Network(NetworkSpec{Name: "tls", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.37.0/24")
	vm1 := e.VM(nw, "vm1")
	t.Logf("vm1 ACTIVE %s after plugging (RPC over TLS)", e.WaitStatus(vm1.Port, "ACTIVE", 60*time.Second))
	metrics, _ := sh(e.Ctx, "curl", "-s", agent.MetricsURL())
	if _, _, err := agent.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	logs := agent.Log() + metrics

	// the wrong CA: refused, and the log says why
	bad, err := NewAgent(tlsCfg(wrongCA))
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = bad.Stop(20 * time.Second) })
	why := regexp.MustCompile(`(?i)x509|certificate`)
	var lines []string
	d, ok := waitFor(e.Ctx, 60*time.Second, func() bool {
		lines = logLines(bad, why)
		return len(lines) > 0
	})
	t.Logf("wrong CA refused %s after start: %s", d.Round(time.Millisecond), strings.Join(firstN(lines, 1), ""))
	if !ok {
		t.Errorf("no TLS verification error in the log of the agent with the wrong CA:\n%s", bad.LogTail(20))
	}
	if q, err := agentQueues(e.Ctx, node, bad.Pid()); err == nil {
		t.Errorf("agent with the wrong CA has a broker connection consuming %d queues", len(q))
	}
	if _, _, err := bad.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	logs += bad.Log()
	n := strings.Count(logs, pass)
	t.Logf("password in %d of %d bytes of logs and metrics", n, len(logs))
	if n > 0 {
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, pass) {
				t.Errorf("password in a log line: %s", strings.ReplaceAll(l, pass, "<PASSWORD>"))
				break
			}
		}
	}
}

// TestReliabTenantIsolation: two VLAN networks on one physnet, two VXLAN
// networks, all with the same subnet and the same addresses: captures in
// every VM while every network pings (and ARPs for an absent address)
// never see a frame of another network.
func TestReliabTenantIsolation(t *testing.T) {
	e := NewEnv(t)
	agent, took := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	t.Logf("agent alive after %s", took)
	_ = agent
	nets := []*Network{
		e.ProviderVLANNetwork("isoA", "physnet1", 150),
		e.ProviderVLANNetwork("isoB", "physnet1", 151),
		e.Network(NetworkSpec{Name: "isoC", NetworkType: "vxlan"}),
		e.Network(NetworkSpec{Name: "isoD", NetworkType: "vxlan"}),
	}
	type pair struct {
		nw   *Network
		a, b *VM
	}
	var pairs []pair
	mine := map[string]int{} // MAC -> network index
	for i, nw := range nets {
		sn := e.Subnet(nw.ID, "10.250.40.0/24")
		vm := func(name, ip string) *VM {
			p := e.Port(PortSpec{Name: fmt.Sprintf("%s-%d", name, i), NetworkID: nw.ID, FixedIPs: []FixedIP{{SubnetID: sn.ID, IPAddress: ip}}})
			return e.Plug(PlugSpec{Port: p, MTU: nw.MTU})
		}
		pr := pair{nw: nw, a: vm("a", "10.250.40.10"), b: vm("b", "10.250.40.11")}
		mine[strings.ToLower(pr.a.MAC)], mine[strings.ToLower(pr.b.MAC)] = i, i
		pairs = append(pairs, pr)
	}
	for _, pr := range pairs {
		e.WaitStatus(pr.a.Port, "ACTIVE", 90*time.Second)
		e.WaitStatus(pr.b.Port, "ACTIVE", 90*time.Second)
	}
	for i, pr := range pairs {
		t.Logf("network %d: %s seg %v", i, pr.nw.NetworkType, pr.nw.SegmentationID)
		if _, err := pr.a.PingUntil(e.Ctx, pr.b.IP, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// captures in every VM
	type capture struct {
		net int
		vm  *VM
		cmd *exec.Cmd
		out *bytes.Buffer
	}
	var caps []*capture
	for i, pr := range pairs {
		for _, vm := range []*VM{pr.a, pr.b} {
			c := &capture{net: i, vm: vm, out: &bytes.Buffer{}}
			c.cmd = exec.Command("ip", "netns", "exec", vm.NS, "tcpdump", "-i", "eth0", "-e", "-n", "-l", "-U")
			c.cmd.Stdout = c.out
			c.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := c.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			caps = append(caps, c)
		}
	}
	time.Sleep(2 * time.Second) // tcpdump attaches
	// traffic in every network at once: unicast both ways, ARP broadcasts
	// for an address nobody has, and a broadcast ping
	errc := make(chan error, 3*len(pairs))
	for _, pr := range pairs {
		pr := pr
		go func() { _, err := pr.a.Ping(e.Ctx, pr.b.IP, 20); errc <- err }()
		go func() { _, err := pr.b.Ping(e.Ctx, pr.a.IP, 20); errc <- err }()
		go func() {
			_, err := pr.a.Exec(e.Ctx, "arping", "-c", "5", "-w", "6", "-I", "eth0", "10.250.40.99")
			if err != nil && !strings.Contains(err.Error(), "exit status 1") {
				errc <- err
				return
			}
			errc <- nil
		}()
	}
	for i := 0; i < 3*len(pairs); i++ {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	time.Sleep(time.Second)
	frameRe := regexp.MustCompile(`^\S+ ([0-9a-f:]{17}) > ([0-9a-f:]{17})`)
	for _, c := range caps {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT)
		_ = c.cmd.Wait()
		// the host end of the VM's own veth (IPv6 router solicitations, MLD from
		// the root namespace) reaches eth0 without crossing br-int: not a tenant's
		tapMAC := ""
		if b, err := os.ReadFile("/sys/class/net/" + c.vm.Tap + "/address"); err == nil {
			tapMAC = strings.TrimSpace(string(b))
		}
		frames, foreign, fromPeer, fromTap := 0, 0, 0, 0
		var sample string
		for _, l := range strings.Split(c.out.String(), "\n") {
			m := frameRe.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			frames++
			src := m[1]
			if src == tapMAC {
				fromTap++
				continue
			}
			if n, ok := mine[src]; !ok || n != c.net {
				foreign++
				if sample == "" {
					sample = l
				}
			} else if src != strings.ToLower(c.vm.MAC) {
				fromPeer++
			}
		}
		t.Logf("net %d %s (%s): %d frames captured, %d from its peer, %d from its own tap's host end, %d foreign", c.net, c.vm.NS, c.vm.IP, frames, fromPeer, fromTap, foreign)
		if foreign > 0 {
			t.Errorf("%s saw %d frames of another network, e.g. %s", c.vm.NS, foreign, sample)
		}
		if fromPeer == 0 {
			t.Errorf("%s captured nothing from its peer: the capture proves nothing", c.vm.NS)
		}
	}
}
