//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// brokerAMQPURL: the broker of the release's server, in the amqp scheme
func brokerAMQPURL() string {
	return "amqp://" + strings.TrimPrefix(DefaultTransportURL(), "rabbit://")
}

var (
	warnLine   = regexp.MustCompile(`^\S+ \S+ \d+ (WARNING|ERROR) `) // oslo.log's line
	reasonAttr = regexp.MustCompile(`reason=(\S+)`)
)

// TestReliabMalformedInput publishes malformed messages straight into every
// queue the running agent consumes (only its queues: through the default
// exchange), one kind at a time: each is logged once with the reason,
// counted in ovsagent_malformed_messages_total and dropped, and the agent
// still wires a port plugged afterwards.
func TestReliabMalformedInput(t *testing.T) {
	e := NewEnv(t)
	agent, took := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	t.Logf("agent alive after %s", took)
	nw := e.Network(NetworkSpec{Name: "mal", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.31.0/24")
	vm1 := e.VM(nw, "vm1")
	t.Logf("vm1 ACTIVE %s after plugging", e.WaitStatus(vm1.Port, "ACTIVE", 60*time.Second))

	node, err := rabbitNode(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	var queues []string
	if _, ok := waitFor(e.Ctx, 30*time.Second, func() bool {
		queues, err = agentQueues(e.Ctx, node, agent.Pid())
		return err == nil && len(queues) >= 27
	}); !ok {
		t.Fatalf("agent queues: %v %v", queues, err)
	}
	topics := map[string][]string{}
	for _, q := range queues {
		topics[queueTopic(q, "hv1")] = append(topics[queueTopic(q, "hv1")], q)
	}
	t.Logf("agent consumes %d queues of %d topics", len(queues), len(topics))
	for tp, qs := range topics {
		if len(qs) != 3 {
			t.Errorf("topic %s: queues %v, want <topic>, <topic>.hv1 and a fanout queue", tp, qs)
		}
	}

	// per topic: the method it carries and arguments of the wrong types
	methodOf := func(topic string) (method, version string, badArgs any) {
		switch {
		case strings.HasPrefix(topic, "neutron-vo-"):
			return "push", "1.1", map[string]any{"resource_list": 42, "event_type": []int{7}}
		case strings.HasSuffix(topic, "l2population-update"):
			return "add_fdb_entries", "1.7", map[string]any{"fdb_entries": "not a map"}
		case strings.HasSuffix(topic, "tunnel-delete"):
			return "tunnel_delete", "1.7", map[string]any{"tunnel_ip": 12, "tunnel_type": []string{"vxlan"}}
		default:
			return "tunnel_update", "1.7", map[string]any{"tunnel_ip": 12, "tunnel_type": []string{"vxlan"}}
		}
	}
	big := append(append([]byte(`{"oslo.version": "2.0", "oslo.message": "`), bytes.Repeat([]byte("x"), 10<<20)...), []byte(`"}`)...)
	type kase struct {
		name string
		msgs map[string][][]byte
	}
	var cases []kase
	each := func(name string, body func(topic string) []byte) {
		m := map[string][][]byte{}
		for _, q := range queues {
			m[q] = [][]byte{body(queueTopic(q, "hv1"))}
		}
		cases = append(cases, kase{name, m})
	}
	each("not-json", func(string) []byte { return []byte("this is not json {") })
	each("envelope-version", func(string) []byte {
		return []byte(`{"oslo.version": "9.9", "oslo.message": "{\"method\": \"push\", \"args\": {}}"}`)
	})
	each("unknown-method", func(tp string) []byte {
		_, v, _ := methodOf(tp)
		return osloCast("no_such_method", v, map[string]any{})
	})
	each("wrong-arg-types", func(tp string) []byte { m, v, a := methodOf(tp); return osloCast(m, v, a) })
	each("unsupported-version", func(tp string) []byte { m, _, _ := methodOf(tp); return osloCast(m, "9.0", map[string]any{}) })
	// 10 MB: one per topic (its fanout queue), ~90 MB through the broker
	bigM := map[string][][]byte{}
	for _, qs := range topics {
		for _, q := range qs {
			if strings.Contains(q, "_fanout_") {
				bigM[q] = [][]byte{big}
			}
		}
	}
	cases = append(cases, kase{"10MB-body", bigM})
	for _, q := range topics["neutron-vo-Port-1.7"] {
		if strings.Contains(q, "_fanout_") {
			cases = append(cases, kase{"push-unknown-ovo", map[string][][]byte{q: {osloCast("push", "1.1", map[string]any{
				"event_type": "updated",
				"resource_list": []any{map[string]any{
					"versioned_object.name": "Bogus", "versioned_object.version": "9.9",
					"versioned_object.namespace": "versionedobjects", "versioned_object.data": map[string]any{"id": newUUID()}}},
			})}}})
			cases = append(cases, kase{"push-port-unknown-version", map[string][][]byte{q: {osloCast("push", "1.1", map[string]any{
				"event_type": "updated",
				"resource_list": []any{map[string]any{
					"versioned_object.name": "Port", "versioned_object.version": "99.0",
					"versioned_object.namespace": "versionedobjects", "versioned_object.data": map[string]any{"id": newUUID()}}},
			})}}})
		}
	}
	for _, q := range topics["q-agent-notifier-l2population-update"] {
		if strings.Contains(q, "_fanout_") {
			cases = append(cases, kase{"l2pop-unknown-network", map[string][][]byte{q: {osloCast("add_fdb_entries", "1.7", map[string]any{
				"fdb_entries": map[string]any{newUUID(): map[string]any{"segment_id": 4242, "network_type": "vxlan",
					"ports": map[string]any{"10.99.99.99": []any{[]string{"00:00:00:00:00:00", "0.0.0.0"}, []string{"fa:16:3e:00:99:99", "10.250.99.9"}}}}},
			})}}})
		}
	}

	totalLines := 0
	for _, c := range cases {
		n := 0
		for _, bs := range c.msgs {
			n += len(bs)
		}
		// An FDB entry for a network this host does not have is what every l2pop
		// agent receives for other hosts' networks (fanout): not malformed, ignored
		// at debug level as the reference does; it must create nothing.
		want := n
		if c.name == "l2pop-unknown-network" {
			want = 0
		}
		before, _, err := metricSum(e.Ctx, agent, "ovsagent_malformed_messages_total")
		if err != nil {
			t.Fatal(err)
		}
		linesBefore := len(logLines(agent, warnLine))
		if err := publishRaw(e.Ctx, brokerAMQPURL(), c.msgs); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var now float64
		d, ok := waitFor(e.Ctx, 60*time.Second, func() bool {
			now, _, _ = metricSum(e.Ctx, agent, "ovsagent_malformed_messages_total")
			return now-before >= float64(want)
		})
		time.Sleep(time.Second) // let duplicates, if any, show up
		now, _, _ = metricSum(e.Ctx, agent, "ovsagent_malformed_messages_total")
		lines := logLines(agent, warnLine)[linesBefore:]
		reasons := map[string]int{}
		for _, l := range lines {
			r := "?"
			if m := reasonAttr.FindStringSubmatch(l); m != nil {
				r = m[1]
			}
			reasons[r]++
		}
		t.Logf("%-26s %3d messages: counted %v in %s, %d log lines, reasons %v", c.name, n, now-before, d.Round(time.Millisecond), len(lines), reasons)
		if !ok || now-before != float64(want) {
			t.Errorf("%s: ovsagent_malformed_messages_total grew by %v, want %d", c.name, now-before, want)
		}
		if c.name == "l2pop-unknown-network" {
			if out, _ := e.OVS.Vsctl(e.Ctx, "--columns=name,options", "find", "Interface", "options:remote_ip=10.99.99.99"); strings.TrimSpace(out) != "" {
				t.Errorf("l2pop entry for an unknown network created a tunnel port: %s", out)
			}
			if fl, _ := e.OVS.DumpFlows(e.Ctx, "br-tun"); strings.Contains(strings.Join(fl, "\n"), "fa:16:3e:00:99:99") {
				t.Errorf("l2pop entry for an unknown network installed a flow")
			}
		}
		// Every message is counted; the log is rate-limited (a burst, then
		// one line per interval carrying the count suppressed meanwhile), so
		// a flood of bad messages cannot flood the log.
		if len(lines) > want {
			t.Errorf("%s: %d WARN/ERROR log lines for %d messages, want at most one each:\n%s", c.name, len(lines), n, strings.Join(firstN(lines, 6), "\n"))
		}
		totalLines += len(lines)
		if agent.Pid() == 0 {
			t.Fatalf("agent exited after %s: %v\n%s", c.name, agent.ExitErr(), agent.LogTail(30))
		}
	}
	if !strings.Contains(strings.Join(logLines(agent, warnLine), "\n"), "suppressed=") {
		t.Errorf("no drop line reports the lines it suppressed (%d lines in all)", totalLines)
	}
	_, by, _ := metricSum(e.Ctx, agent, "ovsagent_malformed_messages_total")
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n  %s %v", k, by[k])
	}
	t.Logf("malformed counters:%s", sb.String())

	// still wiring
	vm2 := e.VM(nw, "vm2")
	t.Logf("vm2 plugged after the malformed input: ACTIVE after %s", e.WaitStatus(vm2.Port, "ACTIVE", 60*time.Second))
	if st, err := vm2.Ping(e.Ctx, vm1.IP, 10); err != nil || st.Lost() > 0 {
		t.Errorf("ping vm2 -> vm1 after the malformed input: %+v %v", st, err)
	}
	if pw, _ := agent.Metric(e.Ctx, "ovsagent_ports_wired"); pw != 2 {
		t.Errorf("ovsagent_ports_wired = %v, want 2", pw)
	}
	if !strings.Contains(agent.Log(), "dropping") && !strings.Contains(agent.Log(), "malformed") {
		t.Errorf("no drop reason in the agent log")
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// TestReliabConfigErrors runs the real binary on bad configurations: each
// exits 1 with exactly one line on stderr naming the option and the value
// (the password of a transport_url masked), and leaves OVS as it was.
func TestReliabConfigErrors(t *testing.T) {
	e := NewEnv(t)
	type kase struct {
		name       string
		cfg        AgentConfig
		extraArgs  []string // replace the config files when set
		option     string   // must appear in the line
		value      string   // must appear in the line
		notInLine  string   // must not appear (secrets)
		rawAgentIn string   // appended to openvswitch_agent.ini
	}
	set := func(sec, k, v string) map[string]map[string]string {
		return map[string]map[string]string{sec: {k: v}}
	}
	cases := []kase{
		{name: "mapping without colon", cfg: AgentConfig{BridgeMappings: "physnet1"}, option: "bridge_mappings", value: "physnet1"},
		{name: "duplicate physnet", cfg: AgentConfig{BridgeMappings: "physnet1:br-phys,physnet1:br-e2e-x"}, option: "bridge_mappings", value: "physnet1"},
		{name: "duplicate bridge", cfg: AgentConfig{BridgeMappings: "physnet1:br-phys,physnet2:br-phys"}, option: "bridge_mappings", value: "br-phys"},
		{name: "missing bridge", cfg: AgentConfig{BridgeMappings: "physnet7:br-e2e-nobr"}, option: "bridge_mappings", value: "br-e2e-nobr"},
		{name: "local_ip not on host", cfg: AgentConfig{LocalIP: "192.0.2.77"}, option: "local_ip", value: "192.0.2.77"},
		{name: "local_ip not an address", cfg: AgentConfig{LocalIP: "10.0.0.300"}, option: "local_ip", value: "10.0.0.300"},
		{name: "tunnels without local_ip", cfg: AgentConfig{Set: set("ovs", "local_ip", "")}, option: "local_ip", value: ""},
		{name: "bad tunnel type", cfg: AgentConfig{TunnelTypes: "vxlan,stt9"}, option: "tunnel_types", value: "stt9"},
		{name: "transport_url scheme", cfg: AgentConfig{TransportURL: "http://guest:hunter2x@127.0.0.1:5672/"}, option: "transport_url", value: "http://", notInLine: "hunter2x"},
		{name: "transport_url unparsable", cfg: AgentConfig{TransportURL: "rabbit://guest:hunter2x@[::1:5672/"}, option: "transport_url", value: "rabbit://", notInLine: "hunter2x"},
		{name: "transport_url bad port", cfg: AgentConfig{TransportURL: "rabbit://guest:hunter2x@127.0.0.1:99999/"}, option: "transport_url", value: "bad port", notInLine: "hunter2x"},
		{name: "config file missing", extraArgs: []string{"--config-file", "/nonexistent/e2e-neutron.conf"}, option: "", value: "/nonexistent/e2e-neutron.conf"},
		{name: "config file is a directory", extraArgs: []string{"--config-file", "/tmp"}, option: "", value: "/tmp"},
		{name: "bad ini syntax", rawAgentIn: "\n[ovs\nfoo = bar\n", option: "", value: "[ovs"},
		{name: "bad integer", cfg: AgentConfig{Set: set("ovs", "of_request_timeout", "sixty")}, option: "of_request_timeout", value: "sixty"},
		{name: "port out of range", cfg: AgentConfig{Set: set("agent", "vxlan_udp_port", "70000")}, option: "vxlan_udp_port", value: "70000"},
		{name: "dscp out of range", cfg: AgentConfig{Set: set("agent", "dscp", "99")}, option: "dscp", value: "99"},
		{name: "bad boolean", cfg: AgentConfig{Set: set("agent", "l2_population", "maybe")}, option: "l2_population", value: "maybe"},
		{name: "bad firewall driver", cfg: AgentConfig{Firewall: "e2e_bogus_driver"}, option: "firewall_driver", value: "e2e_bogus_driver"},
		{name: "bad datapath_type", cfg: AgentConfig{Set: set("ovs", "datapath_type", "warp")}, option: "datapath_type", value: "warp"},
		{name: "bridge name too long", cfg: AgentConfig{Set: set("ovs", "integration_bridge", "br-int-much-too-long")}, option: "integration_bridge", value: "br-int-much-too-long"},
		{name: "bad ovsdb_connection", cfg: AgentConfig{OVSDB: "carrier-pigeon:1"}, option: "ovsdb_connection", value: "carrier-pigeon:1"},
		// Fail closed (internal/config/options.go): features ovs-agent does not have are refused, never accepted and ignored.
		{name: "iptables_hybrid refused", cfg: AgentConfig{Firewall: "iptables_hybrid"}, option: "firewall_driver", value: "iptables_hybrid"},
		{name: "hybrid class path refused", cfg: AgentConfig{Firewall: "neutron.agent.linux.iptables_firewall.OVSHybridIptablesFirewallDriver"}, option: "firewall_driver", value: "OVSHybridIptablesFirewallDriver"},
		// DVR with tunnels needs l2_population, as the reference's _check_agent_configurations
		{name: "DVR without l2pop refused", cfg: AgentConfig{Set: map[string]map[string]string{"agent": {"enable_distributed_routing": "True", "l2_population": "False"}}}, option: "enable_distributed_routing", value: "True"},
		{name: "extensions refused", cfg: AgentConfig{Set: set("agent", "extensions", "qos,log")}, option: "extensions", value: "qos,log"},
		{name: "made-up extension refused", cfg: AgentConfig{Set: set("agent", "extensions", "e2e_made_up")}, option: "extensions", value: "e2e_made_up"},
		{name: "smartnic refused", cfg: AgentConfig{Set: set("agent", "baremetal_smartnic", "True")}, option: "baremetal_smartnic", value: "True"},
		{name: "ovsdb over ssl refused", cfg: AgentConfig{OVSDB: "ssl:127.0.0.1:6640"}, option: "ovsdb_connection", value: "ssl:127.0.0.1:6640"},
		{name: "bandwidth of an unmapped bridge", cfg: AgentConfig{Set: set("ovs", "resource_provider_bandwidths", "br-e2e-unmapped:1000:1000")}, option: "resource_provider_bandwidths", value: "br-e2e-unmapped"},
		{name: "packet rates both ways", cfg: AgentConfig{Set: map[string]map[string]string{"ovs": {"resource_provider_packet_processing_without_direction": ":1000", "resource_provider_packet_processing_with_direction": ":1000:1000"}}}, option: "resource_provider_packet_processing_with_direction", value: ":1000:1000"},
		{name: "inventory default unknown", cfg: AgentConfig{Set: set("ovs", "resource_provider_inventory_defaults", "e2e_bogus:1")}, option: "resource_provider_inventory_defaults", value: "e2e_bogus"},
		{name: "kombu compression refused", cfg: AgentConfig{Set: set("oslo_messaging_rabbit", "kombu_compression", "gzip")}, option: "kombu_compression", value: "gzip"},
		{name: "quorum queues not a bool", cfg: AgentConfig{Set: set("oslo_messaging_rabbit", "rabbit_quorum_queue", "maybe")}, option: "rabbit_quorum_queue", value: "maybe"},
		{name: "quorum with HA refused", cfg: AgentConfig{Set: map[string]map[string]string{"oslo_messaging_rabbit": {"rabbit_quorum_queue": "True", "rabbit_ha_queues": "True"}}}, option: "rabbit_", value: "True"},
		{name: "pprof beyond loopback refused", cfg: AgentConfig{MetricsListen: "0.0.0.0:19696", Set: set("ovsagent", "debug_pprof", "True")}, option: "debug_pprof", value: "0.0.0.0:19696"},
		{name: "log_config_append refused", cfg: AgentConfig{Set: set("DEFAULT", "log_config_append", "/etc/neutron/logging.conf")}, option: "log_config_append", value: "/etc/neutron/logging.conf"},
		{name: "bad syslog facility", cfg: AgentConfig{Set: map[string]map[string]string{"DEFAULT": {"use_syslog": "True", "syslog_log_facility": "LOG_E2E"}}}, option: "syslog_log_facility", value: "LOG_E2E"},
		// oslo.config substitution: a lone "$" names another option; none is called "hunter2x".
		{name: "transport_url lone $", cfg: AgentConfig{TransportURL: "rabbit://guest:pa$hunter2x@127.0.0.1:5672/"}, option: "transport_url", value: "$$", notInLine: "hunter2x"},
		{name: "ssl CA file missing", cfg: AgentConfig{Set: map[string]map[string]string{"oslo_messaging_rabbit": {"ssl": "True", "ssl_ca_file": "/nonexistent/e2e-ca.pem"}}}, option: "ssl_ca_file", value: "/nonexistent/e2e-ca.pem"},
	}
	before, err := ovsState(e.Ctx, e.OVS)
	if err != nil {
		t.Fatal(err)
	}
	passed := 0
	for _, c := range cases {
		a, err := NewAgent(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c.rawAgentIn != "" {
			f, _ := os.OpenFile(a.AgentIni, os.O_APPEND|os.O_WRONLY, 0)
			_, _ = f.WriteString(c.rawAgentIn)
			f.Close()
		}
		args := append(a.args(), "--log-file", a.LogPath)
		if c.extraArgs != nil {
			args = append([]string{"--config-file", a.NeutronConf}, append(c.extraArgs, "--log-file", a.LogPath)...)
		}
		ctx, cancel := context.WithTimeout(e.Ctx, 60*time.Second)
		cmd := exec.CommandContext(ctx, a.Bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		start := time.Now()
		err = cmd.Run()
		took := time.Since(start)
		cancel()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err == nil {
			code = 0
		}
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if stderr.Len() == 0 {
			lines = nil
		}
		line := strings.Join(lines, " | ")
		ok := code == 1 && len(lines) == 1 && strings.Contains(line, c.option) && strings.Contains(line, c.value) &&
			(c.notInLine == "" || !strings.Contains(line+stdout.String()+a.Log(), c.notInLine))
		after, err := ovsState(e.Ctx, e.OVS)
		if err != nil {
			t.Fatal(err)
		}
		same := after == before
		t.Logf("%-26s exit %d in %s, stderr: %s", c.name, code, took.Round(time.Millisecond), line)
		if !ok {
			t.Errorf("%s: want exit 1 and one stderr line naming %q and %q%s; got exit %d, %d lines: %q (stdout %q, log tail %q)",
				c.name, c.option, c.value, map[bool]string{true: " without " + c.notInLine, false: ""}[c.notInLine != ""],
				code, len(lines), line, stdout.String(), a.LogTail(3))
		}
		if !same {
			t.Errorf("%s: OVS changed:\n%s", c.name, ovsDiff(before, after))
			before = after
		}
		if ok && same {
			passed++
		}
	}
	t.Logf("%d/%d bad configurations refused with exit 1, one stderr line, OVS untouched", passed, len(cases))
}

// ovsDiff lists the lines only in a (-) or only in b (+).
func ovsDiff(a, b string) string {
	in := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for l, n := range ma {
		if mb[l] < n {
			out = append(out, "- "+l)
		}
	}
	for l, n := range mb {
		if ma[l] < n {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(firstN(out, 30), "\n")
}

// TestReliabKillMidWiring: two VMs ping each other while 100 ports are
// plugged; the agent is killed with SIGKILL when the plugging is half done
// and some ports are wired, the other half is plugged while it is dead, and
// it is started again: every port ends ACTIVE, each tap has its network's
// local VLAN, no flow of the killed run is left, and no ping is lost.
func TestReliabKillMidWiring(t *testing.T) {
	e := NewEnv(t)
	agent, took := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	t.Logf("agent alive after %s", took)
	nw := e.Network(NetworkSpec{Name: "kill", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.32.0/24")
	vm1, vm2 := e.VM(nw, "vm1"), e.VM(nw, "vm2")
	e.WaitStatus(vm1.Port, "ACTIVE", 60*time.Second)
	e.WaitStatus(vm2.Port, "ACTIVE", 60*time.Second)
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	const n = 100
	start := time.Now()
	bulk := e.bulkPorts(nw, "k", n)
	t.Logf("%d ports created in %s", n, time.Since(start).Round(time.Millisecond))
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
	oldCookies := agent.Cookies()

	start = time.Now()
	if err := plugAll(e.Ctx, e.OVS, bulk[:n/2], 4); err != nil {
		t.Fatal(err)
	}
	// kill once some, not all, of the first half are wired
	var wired float64
	waitFor(e.Ctx, 60*time.Second, func() bool {
		wired, _ = agent.Metric(e.Ctx, "ovsagent_ports_wired")
		return wired >= 2+5
	})
	if err := agent.Kill(); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{vm1.Port.ID: true, vm2.Port.ID: true}
	for _, b := range bulk {
		ids[b.Port.ID] = true
	}
	st, _, _ := e.portStatuses(e.Ctx, nw.ID, ids, "ACTIVE")
	t.Logf("SIGKILL %s after plugging started: %d of 50 plugged, ports_wired %v, statuses %v", time.Since(start).Round(time.Millisecond), n/2, wired, st)
	if err := plugAll(e.Ctx, e.OVS, bulk[n/2:], 4); err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	var off []string
	d, ok := waitFor(e.Ctx, 600*time.Second, func() bool {
		st, off, err = e.portStatuses(e.Ctx, nw.ID, ids, "ACTIVE")
		return err == nil && len(off) == 0 && st["ACTIVE"] == n+2
	})
	t.Logf("all %d ports ACTIVE %s after the restart (%s after plugging started): %v", n+2, d.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), ok)
	if !ok {
		t.Errorf("after %s: statuses %v, not ACTIVE: %v", d, st, firstN(off, 10))
	}
	// in sync: the stale sweep of the killed run's flows happens then
	var stale []string
	d, ok = waitFor(e.Ctx, 60*time.Second, func() bool {
		stale, err = staleFlows(e.Ctx, e.OVS, agent)
		return err == nil && len(stale) == 0
	})
	newCookies := agent.Cookies()
	t.Logf("cookies %v -> %v; no stale flow %s after all ACTIVE: %v", oldCookies, newCookies, d.Round(time.Millisecond), ok)
	if !ok {
		t.Errorf("%d flows not of the new run: %v", len(stale), firstN(stale, 10))
	}
	tags, err := tagsOf(e.Ctx, e.OVS)
	if err != nil {
		t.Fatal(err)
	}
	want := tags[vm1.Tap]
	bad := 0
	for _, tap := range append([]string{vm2.Tap}, func() []string {
		var s []string
		for _, b := range bulk {
			s = append(s, b.Tap)
		}
		return s
	}()...) {
		if tags[tap] != want || want < 1 || want > 4094 {
			bad++
		}
	}
	t.Logf("local VLAN %d on %d taps, %d differ", want, n+2, bad)
	if bad > 0 {
		t.Errorf("%d taps without the network's local VLAN %d", bad, want)
	}
	// The metric follows the server's reply to update_device_list, which
	// comes after the server has flipped the last port ACTIVE in its
	// database (one call, chunked by the client, merged at the end).
	var pw float64
	lag, ok := waitFor(e.Ctx, 60*time.Second, func() bool {
		pw, _ = agent.Metric(e.Ctx, "ovsagent_ports_wired")
		return pw == float64(n+2)
	})
	if !ok {
		t.Errorf("ovsagent_ports_wired = %v, want %d", pw, n+2)
	} else {
		t.Logf("ovsagent_ports_wired = %d %s after every port was ACTIVE in the API", n+2, lag.Round(time.Millisecond))
	}
	time.Sleep(time.Second)
	rep := pinger.Stop()
	stopped = true
	t.Logf("ping vm1 -> vm2 across kill + restart + %d ports: sent %d, lost %d, longest gap %s", n, rep.Sent, rep.Lost(), rep.MaxGap)
	if rep.Lost() > 0 || rep.Sent < 10 {
		t.Errorf("pings lost across the kill: %+v", rep.PingStats)
	}
	_ = restart
}

// TestReliabPlugUnplugChurn: one port plugged and unplugged 200 times
// quickly, and ports created and deleted on the server while plugged
// (create/delete races): afterwards no local VLAN, flow or OVSDB row of them
// is left, and the agent still wires a port.
func TestReliabPlugUnplugChurn(t *testing.T) {
	e := NewEnv(t)
	agent, took := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	t.Logf("agent alive after %s", took)
	baseFlows := map[string]int{}
	for _, br := range []string{"br-int", "br-tun"} {
		fl, err := e.OVS.DumpFlows(e.Ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		baseFlows[br] = len(fl)
	}
	nw := e.Network(NetworkSpec{Name: "churn", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.33.0/24")
	p := e.bulkPorts(nw, "c", 1)[0]
	start := time.Now()
	const rounds = 200
	for i := 0; i < rounds; i++ {
		if err := p.Plug(e.Ctx, e.OVS); err != nil {
			t.Fatal(err)
		}
		if err := p.Unplug(e.Ctx, e.OVS); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d plug/unplug rounds of one port in %s", rounds, time.Since(start).Round(time.Millisecond))

	// create/delete races: ports created, plugged, deleted on the server
	// right away (some before the agent asked for their details), unplugged.
	const racers = 30
	start = time.Now()
	race := e.bulkPorts(nw, "r", racers)
	errc := make(chan error, racers)
	for _, b := range race {
		b := b
		go func() {
			if err := b.Plug(e.Ctx, e.OVS); err != nil {
				errc <- err
				return
			}
			err := e.Neutron.DeletePort(e.Ctx, b.Port.ID)
			if err == nil {
				err = b.Unplug(e.Ctx, e.OVS)
			}
			errc <- err
		}()
	}
	for range race {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d ports created, plugged, deleted on the server and unplugged in %s", racers, time.Since(start).Round(time.Millisecond))

	// let the agent drain, then check for leftovers
	var leftover []string
	d, ok := waitFor(e.Ctx, 120*time.Second, func() bool {
		leftover = nil
		tags, err := tagsOf(e.Ctx, e.OVS)
		if err != nil {
			return false
		}
		for name := range tags {
			if name == p.Tap || strings.HasPrefix(name, "tap"+p.Port.ID[:8]) {
				leftover = append(leftover, "port "+name)
			}
			for _, b := range race {
				if name == b.Tap {
					leftover = append(leftover, "port "+name)
				}
			}
		}
		for br, n0 := range baseFlows {
			fl, err := e.OVS.DumpFlows(e.Ctx, br)
			if err != nil {
				return false
			}
			if len(fl) != n0 {
				leftover = append(leftover, fmt.Sprintf("%s: %d flows, %d before", br, len(fl), n0))
			}
			for _, f := range fl {
				if strings.Contains(f, p.Port.MACAddress) {
					leftover = append(leftover, br+": "+f)
				}
			}
		}
		wired, _ := agent.Metric(e.Ctx, "ovsagent_ports_wired")
		if wired != 0 {
			leftover = append(leftover, fmt.Sprintf("ports_wired %v", wired))
		}
		return len(leftover) == 0
	})
	t.Logf("nothing left (flows back to %v, no tap row, ports_wired 0) %s after the churn: %v", baseFlows, d.Round(time.Millisecond), ok)
	if !ok {
		t.Errorf("left over after the churn: %v", firstN(leftover, 15))
	}
	if ifs, _ := e.OVS.Vsctl(e.Ctx, "--columns=name", "find", "Interface", "external_ids:iface-id="+p.Port.ID); strings.TrimSpace(ifs) != "" {
		t.Errorf("OVSDB Interface rows left: %s", ifs)
	}
	// the local VLAN was freed: a new network's port gets wired and the
	// churned port, plugged once more, gets ACTIVE again
	if err := p.Plug(e.Ctx, e.OVS); err != nil {
		t.Fatal(err)
	}
	t.Logf("churned port plugged once more: ACTIVE after %s", e.WaitStatus(p.Port, "ACTIVE", 60*time.Second))
	if strings.Contains(agent.Log(), "panic") {
		t.Errorf("panic in the agent log")
	}
	if c := len(logLines(agent, regexp.MustCompile(`^\S+ \S+ \d+ ERROR `))); c > 0 {
		t.Logf("%d ERROR lines in the agent log: %v", c, firstN(logLines(agent, regexp.MustCompile(`^\S+ \S+ \d+ ERROR `)), 5))
	}
}
