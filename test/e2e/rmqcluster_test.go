//go:build e2e

package e2e

// A three-node RabbitMQ cluster (refenv/rmqcluster.sh: ovsa1-3@localhost on
// 127.0.0.1:5701-5703, beside the system broker) with quorum queues, a Zed
// neutron-server of its own on :9697, and the agent with transport_url listing
// the three nodes: the node the agent is connected to is killed.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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

// rmqCluster is refenv/rmqcluster.sh's cluster as a test sees it.
type rmqCluster struct {
	script       string
	base         string // data directory (node<N>/beam.pid, home/.erlang.cookie)
	transportURL string
	neutronURL   string
}

// clusterUp starts (or finds running) the cluster and its neutron-server; the
// cleanup stops them if they were not running before.
func clusterUp(t *testing.T, ctx context.Context) *rmqCluster {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := &rmqCluster{script: filepath.Join(root, "refenv", "rmqcluster.sh")}
	// What this test starts it stops; a cluster someone started before is left
	// running (with a node it killed restarted).
	_, err = c.run(ctx, time.Minute, "running")
	wasRunning := err == nil
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		what := "down"
		if wasRunning {
			what = "nodes"
		}
		if out, err := c.run(ctx, 5*time.Minute, what); err != nil {
			t.Errorf("cleanup: rmqcluster.sh %s: %v\n%s", what, err, out)
		}
	})
	start := time.Now()
	if out, err := c.run(ctx, 10*time.Minute, "up"); err != nil {
		t.Fatalf("refenv/rmqcluster.sh up: %v\n%s", err, out)
	}
	t.Logf("cluster and neutron-server :9697 up (%s)", time.Since(start).Round(time.Millisecond))
	out, err := c.run(ctx, time.Minute, "env")
	if err != nil {
		t.Fatalf("refenv/rmqcluster.sh env: %v\n%s", err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
		switch k {
		case "RMQC_TRANSPORT_URL":
			c.transportURL = v
		case "RMQC_NEUTRON_URL":
			c.neutronURL = v
		case "RMQC_BASE":
			c.base = v
		}
	}
	if c.transportURL == "" || c.neutronURL == "" || c.base == "" {
		t.Fatalf("refenv/rmqcluster.sh env printed %q", out)
	}
	return c
}

func (c *rmqCluster) run(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.script, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // the nodes it starts leave our session
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ctl runs rabbitmqctl against node n (1..3) with the cluster's cookie.
func (c *rmqCluster) ctl(ctx context.Context, n int, args ...string) (string, error) {
	return c.run(ctx, 90*time.Second, append([]string{"ctl", strconv.Itoa(n), "-q"}, args...)...)
}

// beamPid is node n's beam.smp pid, checked: a beam.smp with the cluster's
// cookie home whose working directory is node n's.
func (c *rmqCluster) beamPid(n int) (int, error) {
	dir := filepath.Join(c.base, fmt.Sprintf("node%d", n))
	b, err := os.ReadFile(filepath.Join(dir, "beam.pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("node %d beam.pid: %w", n, err)
	}
	cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, fmt.Errorf("node %d pid %d: %w", n, pid, err)
	}
	cmd := strings.ReplaceAll(string(cl), "\x00", " ")
	if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); !strings.Contains(cmd, "beam.smp") ||
		!strings.Contains(cmd, "-home "+filepath.Join(c.base, "home")) || cwd != dir {
		return 0, fmt.Errorf("pid %d is not node %d's beam (cwd %s): %.200s", pid, n, cwd, cmd)
	}
	return pid, nil
}

// clusterQueue is one row of list_queues.
type clusterQueue struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Online []string `json:"-"`
	Leader string   `json:"leader"`
}

// queues lists the queues (through node n) with their online members.
func (c *rmqCluster) queues(ctx context.Context, n int) ([]clusterQueue, error) {
	out, err := c.ctl(ctx, n, "list_queues", "name", "type", "online", "leader", "--formatter", "json")
	if err != nil {
		return nil, fmt.Errorf("list_queues: %w: %s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return nil, fmt.Errorf("list_queues: %w: %.300s", err, out)
	}
	var qs []clusterQueue
	for _, r := range rows {
		q := clusterQueue{}
		q.Name, _ = r["name"].(string)
		q.Type, _ = r["type"].(string)
		q.Leader, _ = r["leader"].(string)
		if on, ok := r["online"].([]any); ok {
			for _, o := range on {
				s, _ := o.(string)
				q.Online = append(q.Online, s)
			}
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// agentConnPorts is the broker ports (5701...) the connections of agent pid
// have, as the cluster lists them (through node n).
func (c *rmqCluster) agentConnPorts(ctx context.Context, n, pid int) ([]string, error) {
	out, err := c.ctl(ctx, n, "list_connections", "port", "client_properties")
	if err != nil {
		return nil, fmt.Errorf("list_connections: %w: %s", err, out)
	}
	var ports []string
	for _, r := range tsvRows(out) {
		if len(r) == 2 && strings.Contains(r[1], fmt.Sprintf(":%d:", pid)) && strings.Contains(r[1], "ovsagent:") {
			ports = append(ports, r[0])
		}
	}
	return ports, nil
}

// connectedLine is the transport's "connected" log line: its time (the oslo
// prefix, local time), the broker and whether it is a reconnection.
var connectedLine = regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) .*oslo: connected .*host=(\S+) .*reconnect=(true|false)(?: setup=(\S+))?`)

type brokerConn struct {
	at        time.Time
	host      string
	reconnect bool
	setup     string // dial to consumers declared
}

func agentConnections(a *Agent) []brokerConn {
	var cs []brokerConn
	sc := bufio.NewScanner(strings.NewReader(a.Log()))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		m := connectedLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02 15:04:05.000", m[1], time.Local)
		if err != nil {
			continue
		}
		cs = append(cs, brokerConn{at: at, host: m[2], reconnect: m[3] == "true", setup: m[4]})
	}
	return cs
}

// rmqcBase holds the private hypervisor of the cluster test: its own OVS in
// netns e2e-rmqc (neutron host e2e-rmqc), so the system OVS, host hv1 and
// the lock holder's flows are not involved.
const rmqcBase = "/tmp/ovsagent-e2e/rmqc"

// rmqcHypervisor starts an OVS of its own in a namespace and relays
// 127.0.0.1:5701-5703 inside it to the cluster's nodes (through unix
// sockets, as the two-host suite relays 5672): a killed node refuses the
// relayed connection as it refuses a direct one.
func rmqcHypervisor(e *Env) *Hypervisor {
	e.T.Helper()
	h := &Hypervisor{Name: "e2e-rmqc", NS: "e2e-rmqc", Dir: rmqcBase, N: 1, LocalIP: "127.0.0.1",
		OVS: OVS{DB: "unix:" + filepath.Join(rmqcBase, "db.sock"), RunDir: rmqcBase}}
	rmqcTeardown(e.T, h) // an aborted run's leftovers
	e.T.Cleanup(func() { rmqcTeardown(e.T, h) })
	if err := h.startOVS(e.Ctx); err != nil {
		e.T.Fatalf("private OVS: %v", err)
	}
	for n := 1; n <= 3; n++ {
		port := 5700 + n
		sock := filepath.Join(h.Dir, fmt.Sprintf("amqp%d.sock", n))
		for _, argv := range [][]string{
			{"socat", "UNIX-LISTEN:" + sock + ",fork,unlink-early", fmt.Sprintf("TCP:127.0.0.1:%d", port)},
			{"ip", "netns", "exec", h.NS, "socat", fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1,fork,reuseaddr", port), "UNIX-CONNECT:" + sock},
		} {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				e.T.Fatalf("relay %d: %v", port, err)
			}
			go func() { _ = cmd.Wait() }()
			h.relays = append(h.relays, cmd)
			if err := os.WriteFile(filepath.Join(h.Dir, fmt.Sprintf("relay-%s-%d.pid", argv[0], n)), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
				e.T.Fatal(err)
			}
		}
		if _, ok := waitFor(e.Ctx, 10*time.Second, func() bool {
			_, err := h.inNS(e.Ctx, "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port))
			return err == nil
		}); !ok {
			e.T.Fatalf("relay of 127.0.0.1:%d in %s not answering", port, h.NS)
		}
	}
	return h
}

// rmqcTeardown stops what rmqcHypervisor started (recorded pids, command
// line checked against the directory), deletes the namespace and directory.
func rmqcTeardown(t testing.TB, h *Hypervisor) {
	ctx, cancel := cleanupCtx()
	defer cancel()
	h.stop(ctx, t, "rmqc")
}

// rmqcVM creates a port bound to the private hypervisor (fixed IP, groups
// given or the default one) and plugs it into its br-int.
func rmqcVM(e *Env, h *Hypervisor, nw *Network, name, ip string, groups []string) *VM {
	e.T.Helper()
	p := e.Port(PortSpec{Name: name, NetworkID: nw.ID, HostID: h.Name, FixedIPs: []FixedIP{{IPAddress: ip}}, SecurityGroups: groups})
	return e.Plug(PlugSpec{Port: p, MTU: nw.MTU, HostNS: h.NS, OVS: h.OVS})
}

// metricInNS reads one metric of an agent that runs in a namespace.
func metricInNS(ctx context.Context, h *Hypervisor, a *Agent, prefix string) (float64, error) {
	body, err := h.inNS(ctx, "curl", "-sf", "-m", "5", a.MetricsURL())
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			f := strings.Fields(l)
			return strconv.ParseFloat(f[len(f)-1], 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", prefix)
}

// TestRabbitClusterFailover: agent (its own OVS, host e2e-rmqc) and server
// (:9697) on a three-node cluster with quorum queues. Twice, the node the
// agent is connected to is killed (SIGKILL of its beam): at the kill a port
// is plugged and a security-group rule (tcp/22, then tcp/23) is added.
// Measured each time: the time until the agent is connected to another node,
// pings between two VMs across the failover (goal 0 lost), the new port
// ACTIVE and reaching a VM, the rule enforced (a real TCP connection). The
// killed node is restarted and the cluster heals (three running nodes, every
// quorum queue with three online members) before the next round.
func TestRabbitClusterFailover(t *testing.T) {
	e := NewEnv(t)
	c := clusterUp(t, e.Ctx)
	e.Neutron = &Neutron{URL: c.neutronURL, Project: Project, HTTP: &http.Client{Timeout: 120 * time.Second}}
	if err := SweepNeutron(e.Ctx, e.Neutron); err != nil { // an aborted run's leftovers on this server
		t.Fatalf("sweep %s: %v", c.neutronURL, err)
	}
	// the quorum options a Zed server (oslo.messaging 14.0) has, as the server has them
	quorum := map[string]map[string]string{"oslo_messaging_rabbit": {"rabbit_quorum_queue": "true"}}
	h := rmqcHypervisor(e)
	e.Host, e.OVS = h.Name, h.OVS
	cfg := h.AgentConfig()
	cfg.TransportURL, cfg.TunnelTypes, cfg.Set = c.transportURL, "vxlan", quorum
	agent, took := e.StartAgentAlive(cfg, 120*time.Second)
	t.Logf("agent alive on the cluster after %s (transport_url %s)", took.Round(time.Millisecond), c.transportURL)

	// the agent's own queues are quorum queues replicated on the three nodes
	qs, err := c.queues(e.Ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	nq := 0
	for _, q := range qs {
		if strings.HasSuffix(q.Name, "."+e.Host) && strings.HasPrefix(q.Name, "q-agent-notifier") {
			nq++
			if q.Type != "quorum" || len(q.Online) != 3 {
				t.Errorf("queue %s: type %s, online %v; want quorum on 3 nodes", q.Name, q.Type, q.Online)
			}
		}
	}
	if nq == 0 {
		t.Fatalf("no q-agent-notifier-*.%s queue on the cluster", e.Host)
	}

	nw := e.Network(NetworkSpec{Name: "rmqc", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.77.0/24")
	// vm2's group lets ICMP in but no tcp: the rules added during the failovers open 22 and 23
	sg := e.SecurityGroup("fo")
	e.Rule(RuleSpec{SecurityGroupID: sg.ID, Protocol: "icmp", RemoteIPPrefix: "0.0.0.0/0"})
	vm1 := rmqcVM(e, h, nw, "vm1", "10.250.77.11", nil)
	vm2 := rmqcVM(e, h, nw, "vm2", "10.250.77.12", []string{sg.ID})
	e.sgWaitActive(vm1, vm2)
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// two rounds: each kills the node the agent is on then, and opens one more port
	for round, tcp := range []int{22, 23} {
		ip := fmt.Sprintf("10.250.77.%d", 21+round)
		failoverRound(t, e, c, h, agent, nw, sg, vm1, vm2, round+1, tcp, ip)
	}
	if ai, err := e.Neutron.OVSAgent(e.Ctx, e.Host); err != nil || ai == nil || !ai.Alive {
		t.Errorf("agent %s not alive on the cluster's server after the heals: %+v %v", e.Host, ai, err)
	}
}

// failoverRound kills the node the agent is connected to. At the kill a port
// created beforehand (as nova creates and binds it) is plugged, and a rule
// opening tcp to vm2 is added. It measures the reconnection, the pings
// vm1 -> vm2, the new port ACTIVE and reaching vm1, the rule in effect; then
// restarts the node and waits until the cluster is healed.
func failoverRound(t *testing.T, e *Env, c *rmqCluster, h *Hypervisor, agent *Agent, nw *Network, sg *SecurityGroup,
	vm1, vm2 *VM, round, tcp int, ip string) {
	sgServe(t, vm2, tcp)
	if err := sgTcpBlocked(e.Ctx, vm1, vm2.IP, tcp); err != nil {
		t.Fatalf("round %d, before the failover: %v", round, err)
	}
	// The new VM is made ready beforehand on a bridge the agent does not manage
	// (as nova creates and binds the port first); at the kill one OVSDB
	// transaction moves its tap to br-int with os-vif's external_ids: the plug
	// lands milliseconds after the kill, inside the failover.
	newPort := e.Port(PortSpec{Name: fmt.Sprintf("vm-r%d", round), NetworkID: nw.ID, HostID: h.Name, FixedIPs: []FixedIP{{IPAddress: ip}}})
	const hold = "br-hold"
	vm := e.Plug(PlugSpec{Port: newPort, MTU: nw.MTU, HostNS: h.NS, OVS: h.OVS, Bridge: hold, EnsureBridge: true})

	// the node the agent is connected to: its log and the cluster agree
	conns := agentConnections(agent)
	if len(conns) == 0 {
		t.Fatalf("no 'oslo: connected' line in the agent log")
	}
	cur := conns[len(conns)-1].host
	_, portStr, _ := strings.Cut(cur, ":")
	port, _ := strconv.Atoi(portStr)
	victim := port - 5700
	if victim < 1 || victim > 3 {
		t.Fatalf("agent connected to %s, not a cluster node", cur)
	}
	other := victim%3 + 1
	ports, err := c.agentConnPorts(e.Ctx, other, agent.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 || ports[0] != portStr {
		t.Fatalf("the cluster lists the agent's connections on ports %v, its log says %s", ports, cur)
	}
	pid, err := c.beamPid(victim)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("round %d: agent connected to ovsa%d@localhost (%s), beam pid %d", round, victim, cur, pid)

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
	time.Sleep(2 * time.Second) // replies before the kill
	nconn := len(conns)

	// ---- kill the agent's node; plug the port and add the rule at once
	killedAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill beam %d: %v", pid, err)
	}
	// Each change is made at once and then waited for, on its own: the rule by a
	// real TCP connection through it, the port by its status.
	type done struct {
		what       string
		madeAt, ok time.Time
		err        error
		vm         *VM
	}
	results := make(chan done, 2)
	go func() {
		r := done{what: fmt.Sprintf("rule tcp/%d added to vm2's group (API call returned)", tcp)}
		_, r.err = e.Neutron.CreateSecurityGroupRule(e.Ctx, RuleSpec{SecurityGroupID: sg.ID, Protocol: "tcp", PortMin: tcp, PortMax: tcp, RemoteIPPrefix: "0.0.0.0/0"})
		r.madeAt = time.Now()
		if r.err == nil {
			deadline := time.Now().Add(120 * time.Second)
			for r.err = vm1.TCPEcho(e.Ctx, vm2.IP, tcp); r.err != nil && time.Now().Before(deadline); r.err = vm1.TCPEcho(e.Ctx, vm2.IP, tcp) {
				time.Sleep(100 * time.Millisecond)
			}
			r.ok = time.Now()
		}
		results <- r
	}()
	go func() {
		r := done{what: fmt.Sprintf("port %s plugged into br-int", ip), vm: vm}
		_, r.err = h.OVS.Vsctl(e.Ctx, "--", "del-port", hold, vm.Tap, "--", "add-port", "br-int", vm.Tap,
			"--", "set", "Interface", vm.Tap, "external_ids:iface-id="+newPort.ID, "external_ids:attached-mac="+vm.MAC,
			"external_ids:iface-status=active", "external_ids:vm-uuid="+newPort.DeviceID)
		r.madeAt = time.Now()
		if r.err == nil {
			_, _, r.err = e.Neutron.WaitPortStatus(e.Ctx, newPort.ID, "ACTIVE", 120*time.Second)
			r.ok = time.Now()
		}
		results <- r
	}()

	// ---- measure: the reconnection, then both changes
	var re brokerConn
	if _, ok := waitFor(e.Ctx, 120*time.Second, func() bool {
		cs := agentConnections(agent)
		if len(cs) > nconn && cs[len(cs)-1].reconnect {
			re = cs[len(cs)-1]
			return true
		}
		return false
	}); !ok {
		t.Fatalf("round %d: agent not reconnected 120 s after the kill:\n%s", round, agent.LogTail(30))
	}
	reconnect := re.at.Sub(killedAt)
	if re.host == cur {
		t.Errorf("round %d: agent reconnected to %s, the killed node", round, re.host)
	}
	var plugged, active, ruleMade, ruleOK time.Duration
	for i := 0; i < 2; i++ {
		r := <-results
		if r.vm != nil {
			vm.Bridge = "br-int" // where Unplug finds it
		}
		if r.err != nil {
			t.Fatalf("round %d: %s: %v", round, r.what, r.err)
		}
		if r.vm != nil {
			plugged, active = r.madeAt.Sub(killedAt), r.ok.Sub(killedAt)
		} else {
			ruleMade, ruleOK = r.madeAt.Sub(killedAt), r.ok.Sub(killedAt)
		}
		t.Logf("round %d: %s %s after the kill, in effect %s after the kill", round, r.what,
			r.madeAt.Sub(killedAt).Round(time.Millisecond), r.ok.Sub(killedAt).Round(time.Millisecond))
	}
	sgEventually(t, 60*time.Second, fmt.Sprintf("round %d: ping %s -> vm1 (the port plugged at the kill)", round, ip), func() error {
		return sgPingOK(e.Ctx, vm, vm1.IP, 1)
	})
	time.Sleep(2 * time.Second) // replies after the failover
	rep := pinger.Stop()
	stopped = true
	for _, v := range []*VM{vm1, vm2, vm} {
		p, err := e.Neutron.GetPort(e.Ctx, v.Port.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != "ACTIVE" {
			t.Errorf("round %d: port %s (%s): %s, want ACTIVE", round, v.NS, v.IP, p.Status)
		}
	}
	resyncs, _ := metricInNS(e.Ctx, h, agent, `ovsagent_resyncs_total{reason="broker-reconnect"}`)
	t.Logf("FAILOVER round %d: node ovsa%d killed; agent on %s again %s after the kill (from %s; connection lost noticed, then dial and consumers declared in %s); pings vm1->vm2 sent %d, lost %d, longest gap %s; port plugged %s after the kill -> ACTIVE at %s; rule tcp/%d (API returned at %s, agent back at %s) enforced at %s; broker-reconnect resyncs %v",
		round, victim, re.host, reconnect.Round(time.Millisecond), cur, re.setup, rep.Sent, rep.Lost(), rep.MaxGap.Round(time.Millisecond),
		plugged.Round(time.Millisecond), active.Round(time.Millisecond), tcp, ruleMade.Round(time.Millisecond),
		reconnect.Round(time.Millisecond), ruleOK.Round(time.Millisecond), resyncs)
	if rep.Lost() > 0 {
		t.Errorf("round %d: pings lost across the failover: %+v", round, rep.PingStats)
	}

	// ---- the killed node comes back; the cluster heals
	healStart := time.Now()
	if out, err := c.run(e.Ctx, 5*time.Minute, "nodes"); err != nil {
		t.Fatalf("round %d: restart ovsa%d: %v\n%s", round, victim, err, out)
	}
	var lagging []string
	_, ok := waitFor(e.Ctx, 120*time.Second, func() bool {
		qs, err := c.queues(e.Ctx, victim)
		if err != nil {
			return false
		}
		lagging = lagging[:0]
		for _, q := range qs {
			if q.Type == "quorum" && len(q.Online) != 3 {
				lagging = append(lagging, fmt.Sprintf("%s%v", q.Name, q.Online))
			}
		}
		return len(lagging) == 0
	})
	sort.Strings(lagging)
	t.Logf("HEAL round %d: ovsa%d restarted, 3 running nodes; every quorum queue with 3 online members %s after the restart began: %v",
		round, victim, time.Since(healStart).Round(time.Millisecond), ok)
	if !ok {
		t.Errorf("round %d: quorum queues without 3 online members: %v", round, firstN(lagging, 10))
	}
	// the agent serves after the heal: a port update reaches it (admin down cuts the new port off)
	if _, err := e.Neutron.UpdatePort(e.Ctx, newPort.ID, map[string]any{"admin_state_up": false}); err != nil {
		t.Fatal(err)
	}
	sgEventually(t, 60*time.Second, fmt.Sprintf("round %d: %s admin down after the heal: ping to vm1 blocked", round, ip), func() error {
		return sgPingBlocked(e.Ctx, vm, vm1.IP, 2)
	})
}
