package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Error is a bad configuration value. Its message is one line naming the
// option (section.key), the value and why; secrets are masked before they get
// here.
type Error struct {
	Option string // section.key, e.g. ovs.bridge_mappings
	Value  string
	Unset  bool // the option is missing rather than wrong
	Reason string
}

func (e *Error) Error() string {
	if e.Unset {
		return fmt.Sprintf("config: %s is not set: %s", e.Option, e.Reason)
	}
	return fmt.Sprintf("config: invalid value for %s %s: %s", e.Option, strconv.Quote(e.Value), oneLine(e.Reason))
}

// parser converts raw strings to typed options and keeps the first error.
type parser struct {
	raw *Raw
	err error
}

func (p *parser) fail(section, key, value, format string, args ...any) {
	if p.err == nil {
		p.err = &Error{Option: p.raw.origin(section, key), Value: value, Reason: fmt.Sprintf(format, args...)}
	}
}

func optName(section, key string) string {
	return section + "." + key
}

func (p *parser) lookup(section, key string) (string, bool) {
	return p.raw.Lookup(section, key)
}

func (p *parser) str(section, key string, dst *string) bool {
	v, ok := p.lookup(section, key)
	if ok {
		*dst = v
	}
	return ok
}

// oslo.config's Boolean type.
func parseBool(v string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "on", "yes":
		return true, true
	case "false", "0", "off", "no":
		return false, true
	}
	return false, false
}

func (p *parser) boolean(section, key string, dst *bool) {
	v, ok := p.lookup(section, key)
	if !ok {
		return
	}
	b, ok := parseBool(v)
	if !ok {
		p.fail(section, key, v, "not a boolean (true/false, yes/no, on/off, 1/0)")
		return
	}
	*dst = b
}

// integer parses an IntOpt within [lo, hi]. An empty value keeps the default
// (oslo.config turns it into None, which the reference agent cannot use).
func (p *parser) integer(section, key string, dst *int, lo, hi int) bool {
	v, ok := p.lookup(section, key)
	if !ok || strings.TrimSpace(v) == "" {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		p.fail(section, key, v, "not an integer")
		return false
	}
	if n < lo || n > hi {
		if hi == math.MaxInt {
			p.fail(section, key, v, "must be >= %d", lo)
		} else {
			p.fail(section, key, v, "must be between %d and %d", lo, hi)
		}
		return false
	}
	*dst = n
	return true
}

// seconds parses an integer number of seconds >= lo.
func (p *parser) seconds(section, key string, dst *time.Duration, lo int) {
	n := 0
	if p.integer(section, key, &n, lo, math.MaxInt) {
		*dst = time.Duration(n) * time.Second
	}
}

// floatSeconds parses a FloatOpt number of seconds >= 0.
func (p *parser) floatSeconds(section, key string, dst *time.Duration) {
	v, ok := p.lookup(section, key)
	if !ok || strings.TrimSpace(v) == "" {
		return
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		p.fail(section, key, v, "not a number")
		return
	}
	if f < 0 {
		p.fail(section, key, v, "must be >= 0")
		return
	}
	*dst = time.Duration(f * float64(time.Second))
}

// splitList is oslo.config's List type for plain strings: comma separated,
// items stripped, empty items dropped.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item != "" {
			out = append(out, item)
		}
	}
	return out
}

func (p *parser) list(section, key string, dst *[]string) bool {
	v, ok := p.lookup(section, key)
	if ok {
		*dst = splitList(v)
	}
	return ok
}

// dict is oslo.config's Dict type: "k1:v1,k2:v2".
func (p *parser) dict(section, key string, dst *map[string]string) {
	v, ok := p.lookup(section, key)
	if !ok {
		return
	}
	m := map[string]string{}
	for _, item := range splitList(v) {
		k, val, found := strings.Cut(item, ":")
		if !found {
			p.fail(section, key, v, "entry %q is not key:value", item)
			return
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	*dst = m
}

// Parse converts raw values into a Config with the reference defaults for
// everything unset. It checks types and ranges only; Validate checks the rest.
func Parse(raw *Raw) (*Config, error) {
	c := Defaults()
	c.Files = append([]string(nil), raw.Files...)
	p := &parser{raw: raw}

	const def, agent, ovs, sg, rabbit, own = "DEFAULT", "agent", "ovs", "securitygroup", "oslo_messaging_rabbit", "ovsagent"

	d := &c.Default
	p.str(def, "host", &d.Host)
	p.str(def, "transport_url", &d.TransportURL)
	p.str(def, "control_exchange", &d.ControlExchange)
	p.seconds(def, "rpc_response_timeout", &d.RPCResponseTimeout, 1)
	p.seconds(def, "rpc_response_max_timeout", &d.RPCResponseMaxTimeout, 1)
	p.integer(def, "rpc_resources_processing_step", &d.RPCResourcesProcessingStep, 1, math.MaxInt)
	p.boolean(def, "debug", &d.Debug)
	p.str(def, "log_file", &d.LogFile)
	p.str(def, "log_dir", &d.LogDir)
	p.boolean(def, "use_stderr", &d.UseStderr)
	p.boolean(def, "use_syslog", &d.UseSyslog)
	p.boolean(def, "use_journal", &d.UseJournal)
	p.boolean(def, "use_json", &d.UseJSON)
	if v, ok := p.lookup(def, "syslog_log_facility"); ok {
		d.SyslogLogFacility = v
	}
	// oslo.log checks the facility only when it opens syslog or the journal.
	if _, ok := SyslogFacility(d.SyslogLogFacility); !ok && (d.UseSyslog || d.UseJournal) {
		p.fail(def, "syslog_log_facility", d.SyslogLogFacility, "not a syslog facility (LOG_USER, LOG_DAEMON, LOG_LOCAL0 ... LOG_LOCAL7, ...)")
	}

	a := &c.Agent
	p.seconds(agent, "polling_interval", &a.PollingInterval, 0)
	p.list(agent, "tunnel_types", &a.TunnelTypes)
	p.integer(agent, "vxlan_udp_port", &a.VXLANUDPPort, 0, 65535)
	p.boolean(agent, "l2_population", &a.L2Population)
	p.boolean(agent, "arp_responder", &a.ARPResponder)
	p.boolean(agent, "enable_distributed_routing", &a.EnableDistributedRouting)
	p.boolean(agent, "dont_fragment", &a.DontFragment)
	p.boolean(agent, "tunnel_csum", &a.TunnelCsum)
	a.DSCPSet = p.integer(agent, "dscp", &a.DSCP, 0, 63)
	p.boolean(agent, "dscp_inherit", &a.DSCPInherit)
	p.boolean(agent, "explicitly_egress_direct", &a.ExplicitlyEgressDirect)
	p.boolean(agent, "drop_flows_on_start", &a.DropFlowsOnStart)
	p.seconds(agent, "quitting_rpc_timeout", &a.QuittingRPCTimeout, 0)
	p.floatSeconds(agent, "report_interval", &a.ReportInterval)
	p.boolean(agent, "log_agent_heartbeats", &a.LogAgentHeartbeats)
	p.list(agent, "extensions", &a.Extensions)

	o := &c.OVS
	p.str(ovs, "integration_bridge", &o.IntegrationBridge)
	p.str(ovs, "tunnel_bridge", &o.TunnelBridge)
	p.str(ovs, "int_peer_patch_port", &o.IntPeerPatchPort)
	p.str(ovs, "tun_peer_patch_port", &o.TunPeerPatchPort)
	if p.str(ovs, "local_ip", &o.LocalIP) {
		o.LocalIP = strings.TrimSpace(o.LocalIP)
	}
	if v, ok := p.lookup(ovs, "bridge_mappings"); ok && p.err == nil {
		o.BridgeMappings, p.err = parseBridgeMappings(v)
	}
	p.str(ovs, "datapath_type", &o.DatapathType)
	p.str(ovs, "vhostuser_socket_dir", &o.VhostuserSocketDir)
	p.seconds(ovs, "of_connect_timeout", &o.OFConnectTimeout, 0)
	p.seconds(ovs, "of_request_timeout", &o.OFRequestTimeout, 0)
	p.seconds(ovs, "of_inactivity_probe", &o.OFInactivityProbe, 0)
	p.str(ovs, "ovsdb_connection", &o.OVSDBConnection)
	p.seconds(ovs, "ovsdb_timeout", &o.OVSDBTimeout, 1)
	p.integer(ovs, "bridge_mac_table_size", &o.BridgeMACTableSize, 1, math.MaxInt)
	p.boolean(ovs, "igmp_snooping_enable", &o.IGMPSnoopingEnable)
	p.boolean(ovs, "trunk_enabled", &o.TrunkEnabled)
	p.boolean(ovs, "igmp_flood", &o.IGMPFlood)
	p.boolean(ovs, "igmp_flood_reports", &o.IGMPFloodReports)
	p.boolean(ovs, "igmp_flood_unregistered", &o.IGMPFloodUnregistered)
	p.boolean(ovs, "qos_meter_bandwidth", &o.QoSMeterBandwidth)
	p.str("ml2", "tunnelled_network_rp_name", &o.Placement.TunnelledRPName)
	p.parsePlacement(c.Default.Host, o.BridgeMappings, &o.Placement)

	s := &c.SecurityGroup
	if v, ok := p.lookup(sg, "firewall_driver"); ok && p.err == nil {
		name, ok := normalizeFirewall(v)
		if !ok {
			p.fail(sg, "firewall_driver", v, "unknown driver (openvswitch, iptables_hybrid, noop)")
		}
		s.FirewallDriver = name
	}
	p.boolean(sg, "enable_security_group", &s.EnableSecurityGroup)
	var ets []string
	if p.list(sg, "permitted_ethertypes", &ets) {
		var warn []string
		s.PermittedEthertypes, warn = parseEthertypes(ets)
		c.Warnings = append(c.Warnings, warn...)
	}

	r := &c.Rabbit
	p.seconds(rabbit, "heartbeat_timeout_threshold", &r.HeartbeatTimeoutThreshold, 0)
	p.seconds(rabbit, "rabbit_retry_interval", &r.RetryInterval, 0)
	p.seconds(rabbit, "rabbit_retry_backoff", &r.RetryBackoff, 0)
	p.seconds(rabbit, "rabbit_interval_max", &r.IntervalMax, 1)
	p.seconds(rabbit, "rabbit_transient_queues_ttl", &r.TransientQueuesTTL, 1)
	p.boolean(rabbit, "ssl", &r.SSL)
	p.str(rabbit, "ssl_ca_file", &r.SSLCAFile)
	p.str(rabbit, "ssl_cert_file", &r.SSLCertFile)
	p.str(rabbit, "ssl_key_file", &r.SSLKeyFile)
	if p.str(rabbit, "ssl_version", &r.SSLVersion) {
		r.SSLVersion = strings.TrimSpace(r.SSLVersion)
	}
	p.boolean(rabbit, "ssl_enforce_hostname_verification", &r.SSLEnforceHostnameVerification)
	p.integer(rabbit, "rabbit_qos_prefetch_count", &r.QOSPrefetchCount, 0, math.MaxInt)
	p.boolean(rabbit, "amqp_durable_queues", &r.DurableQueues)
	p.boolean(rabbit, "amqp_auto_delete", &r.AutoDelete)
	p.boolean(rabbit, "rabbit_ha_queues", &r.HAQueues)
	p.boolean(rabbit, "rabbit_quorum_queue", &r.QuorumQueue)
	p.boolean(rabbit, "rabbit_transient_quorum_queue", &r.TransientQuorumQueue)
	p.boolean(rabbit, "rabbit_stream_fanout", &r.StreamFanout)
	p.boolean(rabbit, "enable_cancel_on_failover", &r.EnableCancelOnFailover)
	p.boolean(rabbit, "use_queue_manager", &r.UseQueueManager)
	// x-delivery-limit and x-max-in-memory-* are AMQP integers (at most 64 bits);
	// the misspelt names are oslo's deprecated names, the new ones win.
	p.integer(rabbit, "rabbit_quorum_delivery_limit", &r.QuorumDeliveryLimit, 0, math.MaxInt)
	p.integer(rabbit, "rabbit_quroum_max_memory_length", &r.QuorumMaxMemoryLength, 0, math.MaxInt)
	p.integer(rabbit, "rabbit_quorum_max_memory_length", &r.QuorumMaxMemoryLength, 0, math.MaxInt)
	p.integer(rabbit, "rabbit_quroum_max_memory_bytes", &r.QuorumMaxMemoryBytes, 0, math.MaxInt)
	p.integer(rabbit, "rabbit_quorum_max_memory_bytes", &r.QuorumMaxMemoryBytes, 0, math.MaxInt)
	p.str(rabbit, "hostname", &r.Hostname)
	p.str(rabbit, "processname", &r.ProcessName)

	w := &c.OVSAgent
	p.str(own, "metrics_listen", &w.MetricsListen)
	ms := 0
	if p.integer(own, "batch_window_ms", &ms, 0, 10000) {
		w.BatchWindow = time.Duration(ms) * time.Millisecond
	}
	p.integer(own, "device_list_chunk_size", &w.DeviceListChunkSize, 0, math.MaxInt)
	p.integer(own, "memory_limit_mib", &w.MemoryLimitMiB, 0, 1<<20)
	p.boolean(own, "debug_pprof", &w.DebugPprof)
	p.boolean(own, "debug_pprof_any_address", &w.DebugPprofAnyAddress)
	p.boolean(own, "explain_endpoint", &w.ExplainEndpoint)

	if raw.err != nil { // a failed substitution explains what follows from it
		return nil, raw.err
	}
	if p.err != nil {
		return nil, p.err
	}
	return c, nil
}

// parseBridgeMappings follows neutron's parse_mappings with unique keys and
// unique values: "physnet:bridge" entries, blanks ignored.
func parseBridgeMappings(v string) ([]BridgeMapping, error) {
	const opt = "ovs.bridge_mappings"
	var out []BridgeMapping
	physnets := map[string]bool{}
	bridges := map[string]bool{}
	for _, entry := range splitList(v) {
		parts := strings.Split(entry, ":")
		if len(parts) != 2 {
			return nil, &Error{Option: opt, Value: v, Reason: fmt.Sprintf("entry %q is not physnet:bridge", entry)}
		}
		physnet, bridge := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
		if physnet == "" || bridge == "" {
			return nil, &Error{Option: opt, Value: v, Reason: fmt.Sprintf("entry %q has an empty physnet or bridge", entry)}
		}
		if strings.ContainsAny(bridge, " \t\n/") {
			return nil, &Error{Option: opt, Value: v, Reason: fmt.Sprintf("bridge name %q is not a valid bridge name", bridge)}
		}
		if len(bridge) > maxBridgeName {
			return nil, &Error{Option: opt, Value: v, Reason: fmt.Sprintf("bridge name %q is longer than %d characters", bridge, maxBridgeName)}
		}
		if physnets[physnet] {
			return nil, &Error{Option: opt, Value: v, Reason: fmt.Sprintf("physical network %q is mapped twice", physnet)}
		}
		if bridges[bridge] {
			return nil, &Error{Option: opt, Value: v, Reason: fmt.Sprintf("bridge %q is mapped twice", bridge)}
		}
		physnets[physnet], bridges[bridge] = true, true
		out = append(out, BridgeMapping{Physnet: physnet, Bridge: bridge})
	}
	return out, nil
}

// normalizeFirewall maps the reference's driver aliases and class paths to a
// short name. Unset (empty) is noop, as in the reference.
func normalizeFirewall(v string) (string, bool) {
	switch strings.TrimSpace(v) {
	case "", "noop", "neutron.agent.firewall.NoopFirewallDriver", "neutron.agent.firewall:NoopFirewallDriver":
		return FirewallNoop, true
	case "openvswitch", "neutron.agent.linux.openvswitch_firewall.OVSFirewallDriver",
		"neutron.agent.linux.openvswitch_firewall:OVSFirewallDriver",
		"neutron.agent.linux.openvswitch_firewall.firewall.OVSFirewallDriver":
		return FirewallOpenvswitch, true
	case "iptables_hybrid", "neutron.agent.linux.iptables_firewall.OVSHybridIptablesFirewallDriver",
		"neutron.agent.linux.iptables_firewall:OVSHybridIptablesFirewallDriver":
		return FirewallIptablesHybrid, true
	}
	return "", false
}

// syslogFacilities are the facilities oslo.log accepts (log.py
// _find_facility), with their numbers (syslog.h).
var syslogFacilities = map[string]int{
	"LOG_KERN": 0, "LOG_USER": 1, "LOG_MAIL": 2, "LOG_DAEMON": 3, "LOG_AUTH": 4, "LOG_SYSLOG": 5,
	"LOG_LPR": 6, "LOG_NEWS": 7, "LOG_UUCP": 8, "LOG_CRON": 9, "LOG_AUTHPRIV": 10, "LOG_FTP": 11,
	"LOG_LOCAL0": 16, "LOG_LOCAL1": 17, "LOG_LOCAL2": 18, "LOG_LOCAL3": 19,
	"LOG_LOCAL4": 20, "LOG_LOCAL5": 21, "LOG_LOCAL6": 22, "LOG_LOCAL7": 23,
}

// SyslogFacility is oslo.log's reading of syslog_log_facility: any case,
// "LOG_" optional ("local0" is LOG_LOCAL0). It returns the facility number.
func SyslogFacility(name string) (int, bool) {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "LOG_") {
		n = "LOG_" + n
	}
	code, ok := syslogFacilities[n]
	return code, ok
}

// EffectiveFirewall is the driver in force: noop when security groups are off.
func (c *Config) EffectiveFirewall() string {
	if !c.SecurityGroup.EnableSecurityGroup {
		return FirewallNoop
	}
	return c.SecurityGroup.FirewallDriver
}

// parseEthertypes follows neutron's parse_permitted_ethertypes: an entry
// must start with 0x and be hexadecimal; others are skipped with a warning,
// and so is a repeat. Values above 0xffff, which the reference would hand
// to OVS in a flow OVS rejects, are skipped too.
func parseEthertypes(entries []string) ([]uint16, []string) {
	var out []uint16
	var warn []string
	seen := map[uint64]bool{}
	for _, e := range entries {
		if len(e) < 2 || !strings.EqualFold(e[:2], "0x") {
			warn = append(warn, fmt.Sprintf("securitygroup.permitted_ethertypes: %q is not a hexadecimal number with 0x; skipped", e))
			continue
		}
		v, err := strconv.ParseUint(e[2:], 16, 64)
		if err != nil {
			warn = append(warn, fmt.Sprintf("securitygroup.permitted_ethertypes: %q is not a hexadecimal number; skipped", e))
			continue
		}
		if v > 0xffff {
			warn = append(warn, fmt.Sprintf("securitygroup.permitted_ethertypes: %q is above 0xffff; skipped", e))
			continue
		}
		if seen[v] {
			warn = append(warn, fmt.Sprintf("securitygroup.permitted_ethertypes: %q is repeated", e))
			continue
		}
		seen[v] = true
		out = append(out, uint16(v))
	}
	return out, warn
}
