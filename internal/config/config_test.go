package config

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fakeAddrs() ([]net.IP, error) {
	return []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.5"), net.ParseIP("fd00::5")}, nil
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const base = "[DEFAULT]\ntransport_url = rabbit://guest:s3cret@127.0.0.1:5672/\n"

func load(t *testing.T, bodies ...string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for i, b := range bodies {
		files = append(files, writeFile(t, dir, "f"+string(rune('a'+i))+".conf", b))
	}
	return Load(Files(files...), Options{HostAddrs: fakeAddrs})
}

func mustLoad(t *testing.T, bodies ...string) *Config {
	t.Helper()
	c, err := load(t, bodies...)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	c := mustLoad(t, base)
	host, _ := os.Hostname()
	if c.Default.Host != host {
		t.Errorf("host = %q, want hostname %q", c.Default.Host, host)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"control_exchange", c.Default.ControlExchange, "neutron"},
		{"rpc_response_timeout", c.Default.RPCResponseTimeout, 60 * time.Second},
		{"rpc_response_max_timeout", c.Default.RPCResponseMaxTimeout, 600 * time.Second},
		{"rpc_resources_processing_step", c.Default.RPCResourcesProcessingStep, 20},
		{"polling_interval", c.Agent.PollingInterval, 2 * time.Second},
		{"vxlan_udp_port", c.Agent.VXLANUDPPort, 4789},
		{"dont_fragment", c.Agent.DontFragment, true},
		{"quitting_rpc_timeout", c.Agent.QuittingRPCTimeout, 10 * time.Second},
		{"report_interval", c.Agent.ReportInterval, 30 * time.Second},
		{"integration_bridge", c.OVS.IntegrationBridge, "br-int"},
		{"tunnel_bridge", c.OVS.TunnelBridge, "br-tun"},
		{"int_peer_patch_port", c.OVS.IntPeerPatchPort, "patch-tun"},
		{"tun_peer_patch_port", c.OVS.TunPeerPatchPort, "patch-int"},
		{"datapath_type", c.OVS.DatapathType, "system"},
		{"of_inactivity_probe", c.OVS.OFInactivityProbe, 10 * time.Second},
		{"ovsdb_connection", c.OVS.OVSDBConnection, "tcp:127.0.0.1:6640"},
		{"bridge_mac_table_size", c.OVS.BridgeMACTableSize, 50000},
		{"firewall_driver", c.SecurityGroup.FirewallDriver, FirewallNoop},
		{"enable_security_group", c.SecurityGroup.EnableSecurityGroup, true},
		{"heartbeat_timeout_threshold", c.Rabbit.HeartbeatTimeoutThreshold, 60 * time.Second},
		{"rabbit_transient_queues_ttl", c.Rabbit.TransientQueuesTTL, 1800 * time.Second},
		{"rabbit_interval_max", c.Rabbit.IntervalMax, 30 * time.Second},
		{"metrics_listen", c.OVSAgent.MetricsListen, "127.0.0.1:19696"},
		{"explain_endpoint", c.OVSAgent.ExplainEndpoint, false},
		{"debug_pprof", c.OVSAgent.DebugPprof, false},
		{"debug_pprof_any_address", c.OVSAgent.DebugPprofAnyAddress, false},
		{"batch_window", c.OVSAgent.BatchWindow, 10 * time.Millisecond},
		{"device list chunk", c.DeviceListChunk(), 20},
		{"vhost", c.Default.Transport.VHost, "/"},
		{"broker", c.Default.Transport.Hosts[0].Addr(), "127.0.0.1:5672"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

// The refenv's files as the reference agent reads them.
func TestRefenvFiles(t *testing.T) {
	neutronConf := `# refenv neutron.conf
[DEFAULT]
debug = False
core_plugin = ml2
transport_url = rabbit://guest:guest@127.0.0.1:5672/
[agent]
root_helper = sudo neutron-rootwrap /etc/neutron/rootwrap.conf
report_interval = 30
[oslo_messaging_rabbit]
# defaults: amqp_durable_queues=False, rabbit_ha_queues=False
`
	agentIni := `[DEFAULT]
host = hv1

[ovs]
integration_bridge = br-int
tunnel_bridge = br-tun
local_ip = 127.0.0.1
bridge_mappings = physnet1:br-phys
datapath_type = netdev
ovsdb_connection = unix:/var/run/openvswitch/db.sock
of_listen_address = 127.0.0.1
of_listen_port = 6633

[agent]
tunnel_types = vxlan
l2_population = True
arp_responder = False

[securitygroup]
enable_security_group = True
firewall_driver = openvswitch
`
	c := mustLoad(t, neutronConf, agentIni)
	if c.Default.Host != "hv1" || c.OVS.LocalIP != "127.0.0.1" || c.OVS.DatapathType != "netdev" ||
		!reflect.DeepEqual(c.Agent.TunnelTypes, []string{"vxlan"}) || !c.Agent.L2Population ||
		c.SecurityGroup.FirewallDriver != FirewallOpenvswitch || c.EffectiveFirewall() != FirewallOpenvswitch ||
		!reflect.DeepEqual(c.OVS.BridgeMappings, []BridgeMapping{{"physnet1", "br-phys"}}) ||
		c.OVS.OVSDBConnection != "unix:/var/run/openvswitch/db.sock" {
		t.Fatalf("unexpected config: %+v", c)
	}
	if b, ok := c.BridgeForPhysnet("physnet1"); !ok || b != "br-phys" {
		t.Errorf("BridgeForPhysnet = %q %v", b, ok)
	}
	if c.Default.Transport.Hosts[0].Password != "guest" || c.Default.Transport.Hosts[0].User != "guest" {
		t.Errorf("password not parsed")
	}
	if len(c.Files) != 2 {
		t.Errorf("files = %v", c.Files)
	}
}

func TestLastValueWins(t *testing.T) {
	// within one file, a repeated key: the last one wins (ini's default is the first)
	c := mustLoad(t, base+"[ovs]\nlocal_ip = 10.0.0.1\nlocal_ip = 10.0.0.5\n[agent]\npolling_interval = 5\npolling_interval = 7\npolling_interval = 5\n")
	if c.OVS.LocalIP != "10.0.0.5" {
		t.Errorf("repeated key: local_ip = %q, want 10.0.0.5", c.OVS.LocalIP)
	}
	// a duplicate of an earlier value must not be collapsed away
	if c.Agent.PollingInterval != 5*time.Second {
		t.Errorf("repeated key with duplicate: polling_interval = %v, want 5s", c.Agent.PollingInterval)
	}
	// across files: the later file wins
	c = mustLoad(t, base+"[ovs]\nlocal_ip = 10.0.0.1\n", "[ovs]\nlocal_ip = 10.0.0.5\n")
	if c.OVS.LocalIP != "10.0.0.5" {
		t.Errorf("across files: local_ip = %q, want 10.0.0.5", c.OVS.LocalIP)
	}
	// an empty value in a later file still overrides
	c = mustLoad(t, base+"[ovs]\nbridge_mappings = physnet1:br-phys\n", "[ovs]\nbridge_mappings =\n")
	if len(c.OVS.BridgeMappings) != 0 {
		t.Errorf("empty override: bridge_mappings = %v, want none", c.OVS.BridgeMappings)
	}
	// sections are case-insensitive, DEFAULT too
	c = mustLoad(t, base+"[OVS]\nintegration_bridge = br-a\n[ovs]\nintegration_bridge = br-b\n[default]\nhost = h2\n")
	if c.OVS.IntegrationBridge != "br-b" || c.Default.Host != "h2" {
		t.Errorf("section case: integration_bridge = %q host = %q", c.OVS.IntegrationBridge, c.Default.Host)
	}
}

func TestConfigDir(t *testing.T) {
	dir := t.TempDir()
	confd := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(confd, 0o755); err != nil {
		t.Fatal(err)
	}
	main := writeFile(t, dir, "neutron.conf", base+"[DEFAULT]\nhost = from-file\n[agent]\npolling_interval = 3\n")
	writeFile(t, confd, "20-b.conf", "[DEFAULT]\nhost = from-b\n")
	writeFile(t, confd, "10-a.conf", "[DEFAULT]\nhost = from-a\n[agent]\npolling_interval = 4\n")
	writeFile(t, confd, "30-ignored.ini", "[DEFAULT]\nhost = not-a-conf\n")
	c, err := Load([]Source{{Path: main}, {Path: confd, Dir: true}}, Options{HostAddrs: fakeAddrs})
	if err != nil {
		t.Fatal(err)
	}
	if c.Default.Host != "from-b" || c.Agent.PollingInterval != 4*time.Second {
		t.Errorf("host = %q polling = %v, want from-b 4s", c.Default.Host, c.Agent.PollingInterval)
	}
	want := []string{main, filepath.Join(confd, "10-a.conf"), filepath.Join(confd, "20-b.conf")}
	if !reflect.DeepEqual(c.Files, want) {
		t.Errorf("files = %v, want %v", c.Files, want)
	}
	// a directory before a file: the file, later on the command line, wins
	c, err = Load([]Source{{Path: confd, Dir: true}, {Path: main}}, Options{HostAddrs: fakeAddrs})
	if err != nil {
		t.Fatal(err)
	}
	if c.Default.Host != "from-file" {
		t.Errorf("order: host = %q, want from-file", c.Default.Host)
	}
}

func TestMultilineAndComments(t *testing.T) {
	c := mustLoad(t, base+`
# a comment
; another comment
[ovs]
local_ip = 10.0.0.5
bridge_mappings = physnet1:br-phys,
    physnet2:br-two ,
	physnet3:br-three
vhostuser_socket_dir = /run/vu # not a comment in oslo.config
[agent]
tunnel_types =
    vxlan,
    gre
[securitygroup]
permitted_ethertypes = 0x4008,0x88cc
`)
	want := []BridgeMapping{{"physnet1", "br-phys"}, {"physnet2", "br-two"}, {"physnet3", "br-three"}}
	if !reflect.DeepEqual(c.OVS.BridgeMappings, want) {
		t.Errorf("bridge_mappings = %v, want %v", c.OVS.BridgeMappings, want)
	}
	if c.OVS.VhostuserSocketDir != "/run/vu # not a comment in oslo.config" {
		t.Errorf("vhostuser_socket_dir = %q", c.OVS.VhostuserSocketDir)
	}
	if !reflect.DeepEqual(c.Agent.TunnelTypes, []string{"vxlan", "gre"}) {
		t.Errorf("tunnel_types = %q", c.Agent.TunnelTypes)
	}
	if !reflect.DeepEqual(c.SecurityGroup.PermittedEthertypes, []uint16{0x4008, 0x88cc}) {
		t.Errorf("permitted_ethertypes = %v", c.SecurityGroup.PermittedEthertypes)
	}
	raw, err := ReadSources(Files(writeFile(t, t.TempDir(), "x.conf", "[s]\nk = line one\n    line two\n      line three\n")))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := raw.Lookup("s", "k"); v != "line one\nline two\nline three" {
		t.Errorf("multi-line value = %q", v)
	}
}

func TestEnvironmentSource(t *testing.T) {
	t.Setenv("OS_OVS__LOCAL_IP", "10.0.0.5")
	t.Setenv("OS_AGENT__TUNNEL_TYPES", "gre")
	t.Setenv("OS_DEFAULT__HOST", "from-env")
	c := mustLoad(t, base+"host = from-file\n[ovs]\nlocal_ip = 10.0.0.1\n")
	if c.OVS.LocalIP != "10.0.0.5" || c.Default.Host != "from-env" || !reflect.DeepEqual(c.Agent.TunnelTypes, []string{"gre"}) {
		t.Errorf("env: local_ip=%q host=%q tunnel_types=%v", c.OVS.LocalIP, c.Default.Host, c.Agent.TunnelTypes)
	}
}

func TestHostDefault(t *testing.T) {
	c := mustLoad(t, base)
	if h, _ := os.Hostname(); c.Default.Host != h || h == "" {
		t.Errorf("host = %q, hostname %q", c.Default.Host, h)
	}
	c = mustLoad(t, base+"host = compute-1.example.org\n")
	if c.Default.Host != "compute-1.example.org" {
		t.Errorf("host = %q", c.Default.Host)
	}
}

func TestTypedValues(t *testing.T) {
	c := mustLoad(t, base+`debug = yes
rpc_response_timeout = 30
[agent]
report_interval = 2.5
dscp = 18
dont_fragment = OFF
[ovs]
resource_provider_hypervisors = br-phys:hv1, br-x:hv2
[oslo_messaging_rabbit]
heartbeat_rate = 3
[ovsagent]
metrics_listen =
batch_window_ms = 25
device_list_chunk_size = 100
memory_limit_mib = 48
debug_pprof = true
[securitygroup]
firewall_driver = neutron.agent.linux.iptables_firewall.OVSHybridIptablesFirewallDriver
enable_security_group = false
`)
	if !c.Default.Debug || c.Default.RPCResponseTimeout != 30*time.Second || c.Agent.ReportInterval != 2500*time.Millisecond ||
		!c.Agent.DSCPSet || c.Agent.DSCP != 18 || c.Agent.DontFragment ||
		c.OVSAgent.MetricsListen != "" || c.OVSAgent.BatchWindow != 25*time.Millisecond ||
		c.DeviceListChunk() != 100 || c.OVSAgent.MemoryLimitMiB != 48 || !c.OVSAgent.DebugPprof || c.SecurityGroup.FirewallDriver != FirewallIptablesHybrid || c.EffectiveFirewall() != FirewallNoop {
		t.Errorf("unexpected: %+v", c)
	}
	if !reflect.DeepEqual(c.OVS.Placement.Hypervisors, map[string]string{"br-phys": "hv1", "br-x": "hv2"}) {
		t.Errorf("hypervisors = %v", c.OVS.Placement.Hypervisors)
	}
}

func TestBadConfigs(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		option string // must appear in the message
		value  string // must appear in the message
	}{
		{"bridge_mappings no colon", "[ovs]\nbridge_mappings = physnet1\n", "ovs.bridge_mappings", "physnet1"},
		{"bridge_mappings too many colons", "[ovs]\nbridge_mappings = a:b:c\n", "ovs.bridge_mappings", "a:b:c"},
		{"bridge_mappings empty bridge", "[ovs]\nbridge_mappings = physnet1:\n", "ovs.bridge_mappings", "physnet1:"},
		{"duplicate physnet", "[ovs]\nbridge_mappings = physnet1:br-a,physnet1:br-b\n", "ovs.bridge_mappings", "physnet1:br-a,physnet1:br-b"},
		{"duplicate bridge", "[ovs]\nbridge_mappings = p1:br-a,p2:br-a\n", "ovs.bridge_mappings", "p1:br-a,p2:br-a"},
		{"mapping onto br-int", "[ovs]\nbridge_mappings = p1:br-int\n", "ovs.bridge_mappings", "p1:br-int"},
		{"mapped bridge name too long", "[ovs]\nbridge_mappings = p1:br-provider-too-long\n", "ovs.bridge_mappings", "br-provider-too-long"},
		{"integration_bridge too long", "[ovs]\nintegration_bridge = br-int-much-too-long\n", "ovs.integration_bridge", "br-int-much-too-long"},
		{"tunnel_bridge too long", "[ovs]\ntunnel_bridge = br-tun-much-too-long\n", "ovs.tunnel_bridge", "br-tun-much-too-long"},
		{"unknown tunnel type", "[agent]\ntunnel_types = vxlan,stt\n[ovs]\nlocal_ip = 127.0.0.1\n", "agent.tunnel_types", "stt"},
		{"local_ip not on host", "[agent]\ntunnel_types = vxlan\n[ovs]\nlocal_ip = 192.0.2.7\n", "ovs.local_ip", "192.0.2.7"},
		{"local_ip missing with tunnels", "[agent]\ntunnel_types = gre\n", "ovs.local_ip", ""},
		{"local_ip not an IP", "[ovs]\nlocal_ip = hv1.example\n", "ovs.local_ip", "hv1.example"},
		{"dvr without l2pop", "[agent]\ntunnel_types = vxlan\nenable_distributed_routing = true\n[ovs]\nlocal_ip = 10.0.0.5\n", "agent.enable_distributed_routing", ""},
		{"bad integer", "[agent]\npolling_interval = two\n", "agent.polling_interval", "two"},
		{"integer out of range", "[agent]\nvxlan_udp_port = 70000\n", "agent.vxlan_udp_port", "70000"},
		{"dscp out of range", "[agent]\ndscp = 64\n", "agent.dscp", "64"},
		{"negative polling", "[agent]\npolling_interval = -1\n", "agent.polling_interval", "-1"},
		{"bad bool", "[agent]\nl2_population = maybe\n", "agent.l2_population", "maybe"},
		{"bad float", "[agent]\nreport_interval = 30s\n", "agent.report_interval", "30s"},
		{"unknown firewall", "[securitygroup]\nfirewall_driver = iptables_fancy\n", "securitygroup.firewall_driver", "iptables_fancy"},
		{"bad datapath", "[ovs]\ndatapath_type = dpdk\n", "ovs.datapath_type", "dpdk"},
		{"bad ovsdb_connection", "[ovs]\novsdb_connection = http://127.0.0.1:6640\n", "ovs.ovsdb_connection", "http://127.0.0.1:6640"},
		{"bad rabbit int", "[oslo_messaging_rabbit]\nrabbit_transient_queues_ttl = 0\n", "oslo_messaging_rabbit.rabbit_transient_queues_ttl", "0"},
		{"bad rabbit bool", "[oslo_messaging_rabbit]\nssl = sure\n", "oslo_messaging_rabbit.ssl", "sure"},
		{"bad host", "[DEFAULT]\nhost = hv 1\n", "DEFAULT.host", "hv 1"},
		{"transport not rabbit", "[DEFAULT]\ntransport_url = kafka://u:hunter2@127.0.0.1:9092/\n", "DEFAULT.transport_url", `"kafka://***": unsupported scheme "kafka"`},
		{"transport no host", "[DEFAULT]\ntransport_url = rabbit://u:hunter2@/\n", "DEFAULT.transport_url", `"rabbit://***": host 1: missing host name`},
		{"transport bad port", "[DEFAULT]\ntransport_url = rabbit://u:hunter2@127.0.0.1:56x2/\n", "DEFAULT.transport_url", `"rabbit://***": host 1: bad port`},
		{"transport password cut by a question mark", "[DEFAULT]\ntransport_url = rabbit://u:12?hunter2@127.0.0.1/\n", "DEFAULT.transport_url", `"rabbit://***": '@' after the broker list`},
		{"transport not a url", "[DEFAULT]\ntransport_url = guest:hunter2@127.0.0.1\n", "DEFAULT.transport_url", ""},
		{"transport unset", "[DEFAULT]\ntransport_url =\n", "DEFAULT.transport_url", ""},
		{"bad dict", "[ovs]\nresource_provider_hypervisors = br-phys\n", "ovs.resource_provider_hypervisors", "br-phys"},
		{"bad metrics_listen", "[ovsagent]\nmetrics_listen = 19696\n", "ovsagent.metrics_listen", "19696"},
		{"pprof on every address", "[ovsagent]\ndebug_pprof = True\nmetrics_listen = :19696\n", "ovsagent.debug_pprof", "metrics_listen :19696"},
		{"pprof on a host address", "[ovsagent]\ndebug_pprof = True\nmetrics_listen = 192.0.2.1:19696\n", "ovsagent.debug_pprof", "192.0.2.1:19696"},
		{"pprof on a host name", "[ovsagent]\ndebug_pprof = True\nmetrics_listen = hv1.example.org:19696\n", "ovsagent.debug_pprof", "debug_pprof_any_address"},
		{"max timeout below timeout", "[DEFAULT]\nrpc_response_timeout = 900\n", "DEFAULT.rpc_response_max_timeout", "600"},
		{"unparsable file", "[ovs\nlocal_ip = 1.2.3.4\n", "cannot parse", ""},
	}
	if len(tests) < 15 {
		t.Fatal("want at least 15 bad configs")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, base, tc.body)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("message is not one line: %q", msg)
			}
			if !strings.Contains(msg, tc.option) || !strings.Contains(msg, tc.value) {
				t.Errorf("message %q does not name %s and %q", msg, tc.option, tc.value)
			}
			for _, secret := range []string{"hunter2", "s3cret"} {
				if strings.Contains(msg, secret) {
					t.Errorf("message leaks the password: %q", msg)
				}
			}
		})
	}
}

// TestMetricsListenerOptions: the profiles are served on loopback, or
// anywhere when forced; /explain only when asked.
func TestMetricsListenerOptions(t *testing.T) {
	for _, body := range []string{
		"[ovsagent]\ndebug_pprof = True\n",
		"[ovsagent]\ndebug_pprof = True\nmetrics_listen = [::1]:19696\n",
		"[ovsagent]\ndebug_pprof = True\nmetrics_listen = localhost:19696\n",
		"[ovsagent]\ndebug_pprof = True\nmetrics_listen = 0.0.0.0:19696\ndebug_pprof_any_address = True\n",
		"[ovsagent]\ndebug_pprof = False\nmetrics_listen = 0.0.0.0:19696\n",
	} {
		if _, err := load(t, base, body); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
	c := mustLoad(t, base, "[ovsagent]\nexplain_endpoint = True\ndebug_pprof_any_address = True\n")
	if !c.OVSAgent.ExplainEndpoint || !c.OVSAgent.DebugPprofAnyAddress {
		t.Errorf("explain_endpoint %v, debug_pprof_any_address %v; want both true", c.OVSAgent.ExplainEndpoint, c.OVSAgent.DebugPprofAnyAddress)
	}
}

func TestUnreadable(t *testing.T) {
	_, err := Load(Files(filepath.Join(t.TempDir(), "missing.conf")), Options{HostAddrs: fakeAddrs})
	if err == nil || !strings.Contains(err.Error(), "missing.conf") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
	_, err = Load([]Source{{Path: filepath.Join(t.TempDir(), "nodir"), Dir: true}}, Options{HostAddrs: fakeAddrs})
	if err == nil || !strings.Contains(err.Error(), "nodir") {
		t.Fatalf("err = %v", err)
	}
}

func TestMaskTransportURL(t *testing.T) {
	for in, want := range map[string]string{
		"rabbit://a:secret@h:5672/":             "rabbit://a:***@h:5672/",
		"rabbit://a:secret@h1,a:secret@h2/?x=1": "rabbit://a:***@h1:5672,a:***@h2:5672/?x=1",
		// unparsable: a piece of the password can be anywhere after the scheme
		"rabbit://a:secret@h:bad/":           "rabbit://***",
		"rabbit://a:secret@h1,b:secret2@h2/": "rabbit://***",
		"rabbit://a:12?secret@h/":            "rabbit://***",
		"rabbit://a:secret":                  "rabbit://***",
		"kafka://a:secret@h/":                "kafka://***",
		"a:secret@h":                         "***",
	} {
		if got := MaskTransportURL(in); got != want {
			t.Errorf("MaskTransportURL(%q) = %q, want %q", in, got, want)
		}
	}
}
