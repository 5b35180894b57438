// Package config loads the reference agent's configuration files
// (neutron.conf, openvswitch_agent.ini, ...) the way oslo.config does, into a
// typed Config with the reference defaults, and validates it.
//
// Only options the agent uses are typed; unknown options are ignored, as
// oslo.config ignores options nobody registered. ovsagent's own options live in
// the [ovsagent] section, which the reference agent ignores.
package config

import (
	"os"
	"time"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

// Config is the agent's whole configuration.
type Config struct {
	Default       DefaultOptions
	Agent         AgentOptions
	OVS           OVSOptions
	SecurityGroup SecurityGroupOptions
	Rabbit        RabbitOptions
	OVSAgent      OVSAgentOptions

	// Files lists the configuration files read, in order.
	Files []string
	// Warnings are values skipped as the reference skips them (logged at
	// start and by check-config).
	Warnings []string
}

// DefaultOptions is [DEFAULT].
type DefaultOptions struct {
	Host string // default: the hostname
	// TransportURL is the raw value; it carries the password, never log it.
	// Use Transport.String() (passwords masked) in messages.
	TransportURL               string
	Transport                  oslo.TransportURL // parsed by Validate
	ControlExchange            string            // neutron
	RPCResponseTimeout         time.Duration     // 60 s
	RPCResponseMaxTimeout      time.Duration     // 600 s
	RPCResourcesProcessingStep int               // 20
	Debug                      bool
	LogFile                    string // oslo.log log_file (--log-file overrides)
	LogDir                     string // oslo.log log_dir
	UseStderr                  bool   // oslo.log use_stderr
	UseSyslog                  bool   // oslo.log use_syslog
	UseJournal                 bool   // oslo.log use_journal
	UseJSON                    bool   // oslo.log use_json
	SyslogLogFacility          string // oslo.log syslog_log_facility (LOG_USER)
}

// AgentOptions is [agent].
type AgentOptions struct {
	PollingInterval time.Duration // 2 s
	TunnelTypes     []string      // gre, vxlan, geneve
	VXLANUDPPort    int           // 4789
	L2Population    bool
	ARPResponder    bool
	// EnableDistributedRouting is DVR (internal/dvr, wired in
	// cmd/ovs-agent/features.go; shown end to end by refenv/dvr_e2e.sh, test/e2e TestDVR).
	// A host the reference left with DVR flows is still refused at takeover
	// (internal/agent/unrebuilt.go).
	EnableDistributedRouting bool
	DontFragment             bool // true
	TunnelCsum               bool
	DSCP                     int  // 0..63; 0 = unset
	DSCPSet                  bool // dscp was given
	DSCPInherit              bool
	ExplicitlyEgressDirect   bool
	DropFlowsOnStart         bool          // delete every flow of the bridges at start instead of adopting them
	QuittingRPCTimeout       time.Duration // 10 s
	ReportInterval           time.Duration // 30 s; 0 disables state reports
	LogAgentHeartbeats       bool
	// Extensions are the [agent] extensions to run, in order ("qos" only:
	// the option table refuses the others).
	Extensions []string
}

// BridgeMapping is one physnet:bridge entry of [ovs] bridge_mappings.
type BridgeMapping struct {
	Physnet string
	Bridge  string
}

// OVSOptions is [ovs].
type OVSOptions struct {
	IntegrationBridge  string // br-int
	TunnelBridge       string // br-tun
	IntPeerPatchPort   string // patch-tun
	TunPeerPatchPort   string // patch-int
	LocalIP            string // empty when unset
	BridgeMappings     []BridgeMapping
	DatapathType       string        // system | netdev
	VhostuserSocketDir string        // /var/run/openvswitch
	OFConnectTimeout   time.Duration // 300 s
	OFRequestTimeout   time.Duration // 300 s
	OFInactivityProbe  time.Duration // 10 s
	OVSDBConnection    string        // tcp:127.0.0.1:6640
	OVSDBTimeout       time.Duration // 10 s
	BridgeMACTableSize int           // 50000
	IGMPSnoopingEnable bool
	// TrunkEnabled runs the trunk handler (vlan-aware VMs), default True as in the
	// reference, which registers it only then.
	TrunkEnabled bool
	// igmp_flood, igmp_flood_reports (default True), igmp_flood_unregistered:
	// br-int's and its patch ports' mcast-snooping-* other_config.
	IGMPFlood, IGMPFloodReports, IGMPFloodUnregistered bool
	// QoSMeterBandwidth: the qos extension limits bandwidth with OpenFlow
	// meters on br-int (with it) or OVSDB QoS/Queue rows (without).
	QoSMeterBandwidth bool

	// Placement is the resource_provider_* options (and [ml2]
	// tunnelled_network_rp_name), reported in report_state.
	Placement Placement
}

// Firewall driver names, normalised from the reference's aliases and class paths.
const (
	FirewallOpenvswitch    = "openvswitch"
	FirewallIptablesHybrid = "iptables_hybrid"
	FirewallNoop           = "noop"
)

// SecurityGroupOptions is [securitygroup].
type SecurityGroupOptions struct {
	// FirewallDriver is normalised to one of the Firewall* constants; unset is noop.
	FirewallDriver      string
	EnableSecurityGroup bool // true
	// PermittedEthertypes holds the entries of permitted_ethertypes that the
	// reference would use: "0x"-prefixed hexadecimal, each once. Others are
	// skipped with a warning (Config.Warnings), as the reference does: "800"
	// must not become 0x0800 and let all IPv4 past the firewall.
	PermittedEthertypes []uint16
}

// RabbitOptions is [oslo_messaging_rabbit].
type RabbitOptions struct {
	HeartbeatTimeoutThreshold time.Duration // 60 s; 0 disables heartbeats
	RetryInterval             time.Duration // 1 s
	RetryBackoff              time.Duration // 2 s
	IntervalMax               time.Duration // 30 s
	TransientQueuesTTL        time.Duration // 1800 s (x-expires)
	SSL                       bool
	SSLCAFile                 string
	SSLCertFile               string
	SSLKeyFile                string
	QOSPrefetchCount          int // 0 = unlimited

	// SSLVersion is ssl_version as written ("", SSLv23 or TLSv1_2; the
	// option table refuses the others).
	SSLVersion string
	// SSLEnforceHostnameVerification checks the broker's name in its
	// certificate, only when SSLCAFile is set (oslo.messaging); False by
	// default, as in the reference's oslo.messaging 14.0.3+deb12u1.
	SSLEnforceHostnameVerification bool

	// Declarations, as oslo.messaging makes them (oslo.Queues says how).
	DurableQueues          bool   // amqp_durable_queues
	AutoDelete             bool   // amqp_auto_delete
	HAQueues               bool   // rabbit_ha_queues
	QuorumQueue            bool   // rabbit_quorum_queue
	TransientQuorumQueue   bool   // rabbit_transient_quorum_queue
	StreamFanout           bool   // rabbit_stream_fanout
	QuorumDeliveryLimit    int    // rabbit_quorum_delivery_limit
	QuorumMaxMemoryLength  int    // rabbit_quorum_max_memory_length (was rabbit_quroum_...)
	QuorumMaxMemoryBytes   int    // rabbit_quorum_max_memory_bytes (was rabbit_quroum_...)
	EnableCancelOnFailover bool   // enable_cancel_on_failover
	UseQueueManager        bool   // use_queue_manager
	Hostname               string // hostname, for the queue manager ("" = this host's name)
	ProcessName            string // processname, for the queue manager ("" = program name)
}

// DefaultMetricsListen is metrics_listen's default. The port is outside
// 9100-9999, the range the Prometheus default-port allocations hand out to
// exporters (9177 is the libvirt exporter's, on every compute host that
// runs it), so no exporter that follows the list can take it; below the
// Linux ephemeral range (32768-60999), so no outgoing connection holds it;
// and not an OpenStack, OVS/OVN, libvirt or Kubernetes port. It reads as
// neutron-server's 9696.
const DefaultMetricsListen = "127.0.0.1:19696"

// OVSAgentOptions is [ovsagent]: ovsagent's additions. They only add; with
// every one at its default the agent behaves as the reference does.
type OVSAgentOptions struct {
	// MetricsListen is host:port for /metrics and /healthz; empty disables.
	// Default 127.0.0.1:19696 (DefaultMetricsListen).
	MetricsListen string
	// ExplainEndpoint serves /explain/<port-id> (any port's addresses,
	// security groups and flows) on the metrics listener, unauthenticated.
	// Default off.
	ExplainEndpoint bool
	// BatchWindow is how long the loop coalesces events that keep coming
	// right after a batch before applying the next one; an event on an idle
	// agent is applied at once. Default 10 ms.
	BatchWindow time.Duration
	// DeviceListChunkSize chunks update_device_list calls; 0 (default) uses
	// [DEFAULT] rpc_resources_processing_step like the reference.
	DeviceListChunkSize int
	// MemoryLimitMiB is the Go runtime's soft memory limit
	// (runtime/debug.SetMemoryLimit) in MiB; 0 (default) sets none. The
	// GOMEMLIMIT environment variable, when set, wins. Set it above the
	// live heap (below it the collector runs nearly non-stop while the agent
	// works): it trades the garbage a wiring burst leaves mapped for more
	// GC cycles while wiring (figures in bench/README.md).
	MemoryLimitMiB int
	// DebugPprof mounts Go's /debug/pprof/ handlers on the metrics
	// listener (heap and CPU profiles of a running agent). Default off;
	// refused on a metrics_listen beyond loopback unless
	// DebugPprofAnyAddress.
	DebugPprof bool
	// DebugPprofAnyAddress lets debug_pprof serve on a non-loopback
	// metrics_listen. Default off.
	DebugPprofAnyAddress bool
}

// DeviceListChunk is the effective update_device_list chunk size.
func (c *Config) DeviceListChunk() int {
	if c.OVSAgent.DeviceListChunkSize > 0 {
		return c.OVSAgent.DeviceListChunkSize
	}
	return c.Default.RPCResourcesProcessingStep
}

// BridgeForPhysnet returns the bridge mapped to physnet.
func (c *Config) BridgeForPhysnet(physnet string) (string, bool) {
	for _, m := range c.OVS.BridgeMappings {
		if m.Physnet == physnet {
			return m.Bridge, true
		}
	}
	return "", false
}

// TunnelingEnabled reports whether tunnel_types is non-empty.
func (c *Config) TunnelingEnabled() bool { return len(c.Agent.TunnelTypes) > 0 }

// Defaults returns the reference defaults (host = this machine's hostname).
func Defaults() *Config {
	host, _ := os.Hostname()
	return &Config{
		Default: DefaultOptions{
			Host:                       host,
			ControlExchange:            "neutron",
			RPCResponseTimeout:         60 * time.Second,
			RPCResponseMaxTimeout:      600 * time.Second,
			RPCResourcesProcessingStep: 20,
			SyslogLogFacility:          "LOG_USER",
		},
		Agent: AgentOptions{
			PollingInterval:    2 * time.Second,
			VXLANUDPPort:       4789,
			DontFragment:       true,
			QuittingRPCTimeout: 10 * time.Second,
			ReportInterval:     30 * time.Second,
		},
		OVS: OVSOptions{
			IntegrationBridge:  "br-int",
			TunnelBridge:       "br-tun",
			IntPeerPatchPort:   "patch-tun",
			TunPeerPatchPort:   "patch-int",
			DatapathType:       "system",
			VhostuserSocketDir: "/var/run/openvswitch",
			OFConnectTimeout:   300 * time.Second,
			OFRequestTimeout:   300 * time.Second,
			OFInactivityProbe:  10 * time.Second,
			OVSDBConnection:    "tcp:127.0.0.1:6640",
			OVSDBTimeout:       10 * time.Second,
			BridgeMACTableSize: 50000,
			TrunkEnabled:       true,
			IGMPFloodReports:   true,
			Placement: Placement{
				InventoryDefaults:   defaultInventoryDefaults(),
				PPInventoryDefaults: defaultInventoryDefaults(),
				Hypervisors:         map[string]string{},
				TunnelledRPName:     DefaultRPTunnelledName,
			},
		},
		SecurityGroup: SecurityGroupOptions{
			FirewallDriver:      FirewallNoop,
			EnableSecurityGroup: true,
		},
		Rabbit: RabbitOptions{
			HeartbeatTimeoutThreshold: 60 * time.Second,
			RetryInterval:             time.Second,
			RetryBackoff:              2 * time.Second,
			IntervalMax:               30 * time.Second,
			TransientQueuesTTL:        1800 * time.Second,
		},
		OVSAgent: OVSAgentOptions{
			MetricsListen: DefaultMetricsListen,
			BatchWindow:   10 * time.Millisecond,
		},
	}
}
