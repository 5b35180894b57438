package config

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

func tableIndex(t *testing.T) map[string]OptionInfo {
	t.Helper()
	idx := map[string]OptionInfo{}
	for _, o := range OptionTable() {
		k := optName(o.Section, o.Name)
		if _, dup := idx[k]; dup {
			t.Errorf("option %s has two rows in the option table", k)
		}
		idx[k] = o
	}
	return idx
}

// Every option the parser reads must have a status, and only Honoured or
// Partial ones may be read (a NoEffect or Refused option that the parser
// reads would mean the table lies about it).
func TestOptionTableCoversParser(t *testing.T) {
	idx := tableIndex(t)
	raw, err := ParseBytes([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]bool{}
	raw.asked = func(section, key string) { asked[optName(section, key)] = true }
	if _, err := Parse(raw); err != nil {
		t.Fatal(err)
	}
	raw.asked = nil
	for k := range asked {
		o, ok := idx[k]
		if !ok {
			t.Errorf("the parser reads %s, which has no row in the option table (options.go)", k)
			continue
		}
		if o.Status == NoEffect || o.Status == Refused {
			t.Errorf("the parser reads %s, but the table says %s", k, o.Status)
		}
	}
	for k, o := range idx {
		if o.Status == Honoured && !asked[k] {
			t.Errorf("%s is honoured in the table but the parser never reads it", k)
		}
	}
}

// Every option of the reference (testdata/reference_options.txt) has a row.
func TestOptionTableCoversReference(t *testing.T) {
	idx := tableIndex(t)
	f, err := os.Open("testdata/reference_options.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		if _, ok := idx[line]; !ok {
			t.Errorf("reference option %s has no row in the option table", line)
		}
	}
	if n < 100 {
		t.Fatalf("only %d reference options read", n)
	}
	for k, o := range idx {
		if o.Status != Honoured && o.Status != NoEffect && (o.Accept == nil || o.Refuse == "") {
			t.Errorf("%s is %s but has no Accept or no example of a refused value", k, o.Status)
		}
		if o.Status != Honoured && o.Why == "" {
			t.Errorf("%s is %s without a reason", k, o.Status)
		}
	}
}

// For every refused or partly refused option: its refused value makes Load
// fail with one line naming the option, the value and "not supported"; its
// default (when given) loads.
func TestRefusedOptionsFailLoad(t *testing.T) {
	for _, o := range OptionTable() {
		if o.Status != Refused && o.Status != Partial {
			continue
		}
		name := optName(o.Section, o.Name)
		body := fmt.Sprintf("%s\n[%s]\n%s = %s\n", base, o.Section, o.Name, o.Refuse)
		if o.Section == "DEFAULT" {
			body = fmt.Sprintf("%s%s = %s\n", base, o.Name, o.Refuse)
		}
		_, err := load(t, body)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("%s = %s: want a refusal, got %v", name, o.Refuse, err)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, name) || !strings.Contains(msg, o.Refuse) || !strings.Contains(msg, "not supported") {
			t.Errorf("%s: refusal %q does not name option, value and why in one line", name, msg)
		}
		if o.Status == Refused && o.Default != "" && !strings.HasPrefix(o.Default, "<") {
			body := fmt.Sprintf("%s\n[%s]\n%s = %s\n", base, o.Section, o.Name, o.Default)
			if o.Section == "DEFAULT" {
				body = fmt.Sprintf("%s%s = %s\n", base, o.Name, o.Default)
			}
			if _, err := load(t, body); err != nil {
				t.Errorf("%s = %s (the default): %v", name, o.Default, err)
			}
		}
	}
}

// The values operators meet most, one by one (the list).
func TestRefusedExamples(t *testing.T) {
	cases := []struct{ body, option string }{
		{"[securitygroup]\nfirewall_driver = iptables_hybrid\n", "securitygroup.firewall_driver"},
		{"[securitygroup]\nfirewall_driver = neutron.agent.linux.iptables_firewall.OVSHybridIptablesFirewallDriver\n", "securitygroup.firewall_driver"},
		// refused as the reference refuses it (a ValueError at its start)
		{"[agent]\nenable_distributed_routing = True\ntunnel_types = vxlan\n[ovs]\nlocal_ip = 127.0.0.1\n", "agent.enable_distributed_routing"},
		{"[agent]\nextensions = qos,log\n", "agent.extensions"},
		{"[agent]\nextensions = made_up\n", "agent.extensions"},
		{"[agent]\nbaremetal_smartnic = yes\n", "agent.baremetal_smartnic"},
		{"[ovs]\novsdb_connection = ssl:127.0.0.1:6640\n", "ovs.ovsdb_connection"},
		// Refused as the reference refuses it: no bridge of bridge_mappings to hang on.
		{"[ovs]\nresource_provider_bandwidths = br-phys:1000:1000\n", "ovs.resource_provider_bandwidths"},
		{"[oslo_messaging_rabbit]\nrabbit_quorum_queue = maybe\n", "oslo_messaging_rabbit.rabbit_quorum_queue"},
		// Combinations oslo.messaging refuses at start.
		{"[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\nrabbit_ha_queues = true\n", "oslo_messaging_rabbit.rabbit_ha_queues"},
		{"[oslo_messaging_rabbit]\nrabbit_transient_quorum_queue = true\nrabbit_stream_fanout = true\n", "oslo_messaging_rabbit.rabbit_stream_fanout"},
		{"[oslo_messaging_rabbit]\nrabbit_qos_prefetch_count = 10\nrabbit_stream_fanout = true\n", "oslo_messaging_rabbit.rabbit_stream_fanout"},
	}
	for _, c := range cases {
		_, err := load(t, base+c.body)
		if err == nil || !strings.Contains(err.Error(), c.option) {
			t.Errorf("%q: want an error naming %s, got %v", c.body, c.option, err)
		}
	}
	// Accepted neighbours: the same options at values ovs-agent honours.
	for _, body := range []string{
		"[securitygroup]\nfirewall_driver = openvswitch\n",
		"[securitygroup]\nfirewall_driver = noop\n",
		"[agent]\nextensions =\n",
		"[agent]\nenable_distributed_routing = False\n",
		"[agent]\nenable_distributed_routing = True\nl2_population = True\ntunnel_types = vxlan\n[ovs]\nlocal_ip = 127.0.0.1\n",
		"[ovs]\novsdb_connection = unix:/var/run/openvswitch/db.sock\n",
		"[ovs]\nbridge_mappings = physnet1:br-phys\nresource_provider_bandwidths = br-phys:1000:1000\n",
		"[agent]\nexplicitly_egress_direct = True\n[securitygroup]\nfirewall_driver = noop\n",
		"[agent]\nexplicitly_egress_direct = True\n[securitygroup]\nfirewall_driver = openvswitch\n",
		"[oslo_messaging_rabbit]\nrabbit_login_method = PLAIN\nkombu_failover_strategy = round-robin\n",
		// The messaging options kolla-style clouds turn on.
		"[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\nrabbit_transient_quorum_queue = true\nrabbit_stream_fanout = true\nrabbit_qos_prefetch_count = 10\nuse_queue_manager = true\n",
		"[oslo_messaging_rabbit]\namqp_durable_queues = true\namqp_auto_delete = true\nrabbit_ha_queues = true\n",
	} {
		if _, err := load(t, base+body); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
}

// docs/options.md is rendered from the table; UPDATE_OPTIONS_DOC=1 rewrites it.
func TestOptionsDoc(t *testing.T) {
	const path = "../../docs/options.md"
	want := RenderOptionsDoc()
	if os.Getenv("UPDATE_OPTIONS_DOC") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("docs/options.md is not the rendering of the option table: run UPDATE_OPTIONS_DOC=1 go test ./internal/config -run TestOptionsDoc")
	}
}

// permitted_ethertypes as neutron's parse_permitted_ethertypes: "800"
// (no 0x) must not become IPv4 (0x0800) and let all IPv4 past the firewall.
func TestPermittedEthertypesAsReference(t *testing.T) {
	c := mustLoad(t, base+"[securitygroup]\npermitted_ethertypes = 800,0x88CC,0xzz,0x10000,0x88cc,0X4008,86dd\n")
	want := []uint16{0x88cc, 0x4008}
	if fmt.Sprint(c.SecurityGroup.PermittedEthertypes) != fmt.Sprint(want) {
		t.Errorf("permitted_ethertypes = %#v, want %#v", c.SecurityGroup.PermittedEthertypes, want)
	}
	if len(c.Warnings) != 5 {
		t.Errorf("want 5 warnings (800, 0xzz, 0x10000, repeat, 86dd), got %q", c.Warnings)
	}
	for _, w := range c.Warnings {
		if !strings.Contains(w, "permitted_ethertypes") {
			t.Errorf("warning %q does not name the option", w)
		}
	}
}

// The declaration options reach oslo.Queues as oslo.messaging reads them; the
// misspelt names of oslo.messaging < 14.2 still work and the new ones win.
func TestRabbitQueueOptions(t *testing.T) {
	c, err := load(t, base+"[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\nrabbit_transient_quorum_queue = yes\n"+
		"rabbit_stream_fanout = on\nrabbit_qos_prefetch_count = 10\nuse_queue_manager = 1\nhostname = node1\nprocessname = agent\n"+
		"rabbit_quorum_delivery_limit = 5\nrabbit_quroum_max_memory_length = 7\nrabbit_quroum_max_memory_bytes = 9\n"+
		"rabbit_quorum_max_memory_bytes = 11\namqp_durable_queues = true\namqp_auto_delete = true\nenable_cancel_on_failover = true\n")
	if err != nil {
		t.Fatal(err)
	}
	got := c.RabbitQueues()
	want := oslo.Queues{Durable: true, AutoDelete: true, Quorum: true, TransientQuorum: true, StreamFanout: true,
		QuorumDeliveryLimit: 5, QuorumMaxMemoryLength: 7, QuorumMaxMemoryBytes: 11, CancelOnFailover: true,
		Prefetch: 10, UseQueueManager: true, Hostname: "node1", ProcessName: "agent"}
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	c, err = load(t, base+"[oslo_messaging_rabbit]\nrabbit_ha_queues = true\n")
	if err != nil {
		t.Fatal(err)
	}
	if q := c.RabbitQueues(); q != (oslo.Queues{HA: true}) {
		t.Fatalf("got %+v", q)
	}
}
