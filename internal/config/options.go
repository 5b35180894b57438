package config

import (
	"fmt"
	"sort"
	"strings"
)

// Status says what ovs-agent does with one option of the reference agent.
// Every option the reference reads in the sections below has exactly one
// entry in optionTable; TestOptionTableCoversReference keeps it that way, and
// docs/options.md is rendered from it (TestOptionsDoc).
type Status int

const (
	// Honoured: read and applied as the reference applies it.
	Honoured Status = iota
	// NoEffect: the reference reads it, but it governs machinery ovs-agent
	// does not have (a root helper, an ovsdb-client subprocess, kombu's
	// connection pool); any value is accepted and changes nothing.
	NoEffect
	// Refused: any value other than the reference default is refused at
	// load: the feature behind it is not in ovs-agent.
	Refused
	// Partial: some values are honoured, the others refused (Accept says
	// which).
	Partial
)

func (s Status) String() string {
	switch s {
	case Honoured:
		return "honoured"
	case NoEffect:
		return "no effect"
	case Refused:
		return "refused"
	case Partial:
		return "partly refused"
	}
	return "?"
}

// OptionInfo is one row of the option table.
type OptionInfo struct {
	Section string // DEFAULT, agent, ovs, securitygroup, network_log, oslo_messaging_rabbit, ovsagent, ml2
	Name    string
	Default string // the reference default, as written in a config file
	Status  Status
	// Why explains a NoEffect, Refused or Partial status (what is missing).
	Why string
	// Accept reports whether a raw value is one ovs-agent honours. Nil for
	// Honoured and NoEffect; for Refused it accepts the default only.
	// Accept sees the whole configuration for choices that depend on
	// another option (explicitly_egress_direct on the firewall driver).
	Accept func(v string, all *Raw) bool
	// Refuse is one value the option refuses (the option-table test and
	// docs use it); empty for Honoured and NoEffect.
	Refuse string
	// Proof names, for a Honoured row, a Go test function (anywhere in the
	// repository) that shows the option's effect, not only that it parses;
	// TestHonouredProofsExist checks the name. Set from optionProofs.
	Proof string
}

const notYet = "not supported by ovs-agent yet"

// accept helpers: what a Refused or Partial option lets through.
func isFalse(v string, _ *Raw) bool { b, ok := parseBool(v); return ok && !b }
func isEmpty(v string, _ *Raw) bool { return strings.TrimSpace(v) == "" }
func isEmptyList(v string, _ *Raw) bool {
	return len(splitList(v)) == 0
}
func isOneOf(vals ...string) func(string, *Raw) bool {
	return func(v string, _ *Raw) bool {
		v = strings.TrimSpace(v)
		for _, w := range vals {
			if strings.EqualFold(v, w) {
				return true
			}
		}
		return false
	}
}

// The six sections the issue of failing closed names, plus ovsagent's own.
var optionTable = func() []OptionInfo {
	h := func(sec, name, def string) OptionInfo {
		return OptionInfo{Section: sec, Name: name, Default: def, Status: Honoured}
	}
	ne := func(sec, name, def, why string) OptionInfo {
		return OptionInfo{Section: sec, Name: name, Default: def, Status: NoEffect, Why: why}
	}
	refBool := func(sec, name, why string) OptionInfo {
		return OptionInfo{Section: sec, Name: name, Default: "False", Status: Refused, Why: why, Accept: isFalse, Refuse: "True"}
	}
	refEmpty := func(sec, name, why, refuse string) OptionInfo {
		return OptionInfo{Section: sec, Name: name, Default: "", Status: Refused, Why: why, Accept: isEmpty, Refuse: refuse}
	}
	part := func(sec, name, def, why, refuse string, accept func(string, *Raw) bool) OptionInfo {
		return OptionInfo{Section: sec, Name: name, Default: def, Status: Partial, Why: why, Accept: accept, Refuse: refuse}
	}
	const (
		def, agent, ovs, sg, nlog, rabbit, own = "DEFAULT", "agent", "ovs", "securitygroup", "network_log", "oslo_messaging_rabbit", "ovsagent"
		noHelper                               = "ovs-agent runs no command through a root helper: it speaks OVSDB and OpenFlow itself"
		noMonitor                              = "ovs-agent always follows OVSDB through its own monitor (the reference's minimize_polling = True behaviour); there is no ovsdb-client process"
		noPool                                 = "ovs-agent keeps one AMQP connection; there is no kombu connection pool"
		logFmt                                 = "oslo.log formatting is " + notYet + "; ovs-agent writes its own line format"
		logExt                                 = "used only by the log agent extension, which is refused (agent.extensions)"
		ovsdbTLS                               = "TLS to OVSDB (ssl:) is " + notYet
	)
	rows := []OptionInfo{
		// [DEFAULT], the part the agent reads (neutron's own, oslo.messaging's, oslo.log's).
		h(def, "host", "<hostname>"),
		h(def, "transport_url", ""),
		h(def, "control_exchange", "neutron"),
		h(def, "rpc_response_timeout", "60"),
		h(def, "rpc_response_max_timeout", "600"),
		h(def, "rpc_resources_processing_step", "20"),
		ne(def, "executor_thread_pool_size", "64", "ovs-agent handles messages on goroutines, not an executor pool"),
		refBool(def, "rpc_ping_enabled", "the oslo_rpc_server_ping endpoint is "+notYet),
		ne(def, "state_path", "/var/lib/neutron", "the OVS agent keeps no files under state_path"),
		h(def, "debug", "False"),
		h(def, "log_file", ""),
		h(def, "log_dir", ""),
		h(def, "use_syslog", "False"),
		h(def, "use_journal", "False"),
		h(def, "use_json", "False"),
		h(def, "use_stderr", "False"),
		refEmpty(def, "log_config_append", "a Python logging configuration file cannot be read by ovs-agent", "/etc/neutron/logging.conf"),
		refEmpty(def, "default_log_levels", "per-library log levels are "+notYet, "amqp=WARN"),
		h(def, "syslog_log_facility", "LOG_USER"),
		refBool(def, "watch_log_file", "watching the log file is "+notYet+"; ovs-agent reopens it on SIGHUP (logrotate)"),
		refEmpty(def, "log_date_format", logFmt, "%H:%M"),
		refEmpty(def, "logging_context_format_string", logFmt, "%(message)s"),
		refEmpty(def, "logging_default_format_string", logFmt, "%(message)s"),
		refEmpty(def, "logging_debug_format_suffix", logFmt, "%(funcName)s"),
		refEmpty(def, "logging_exception_prefix", logFmt, "%(asctime)s"),
		refEmpty(def, "logging_user_identity_format", logFmt, "%(user)s"),
		refEmpty(def, "instance_format", logFmt, "[instance: %(uuid)s]"),
		refEmpty(def, "instance_uuid_format", logFmt, "[instance: %(uuid)s]"),
		refBool(def, "publish_errors", "publishing errors as notifications is "+notYet),
		refEmpty(def, "log_rotation_type", "log rotation by oslo.log is "+notYet+"; rotate with logrotate and SIGHUP", "size"),
		ne(def, "log_rotate_interval", "1", "used only with log_rotation_type, which is refused"),
		ne(def, "log_rotate_interval_type", "days", "used only with log_rotation_type, which is refused"),
		ne(def, "max_logfile_count", "30", "used only with log_rotation_type, which is refused"),
		ne(def, "max_logfile_size_mb", "200", "used only with log_rotation_type, which is refused"),
		refEmpty(def, "rate_limit_interval", "log rate limiting by oslo.log is "+notYet, "1"),
		ne(def, "rate_limit_burst", "0", "used only with rate_limit_interval, which is refused"),
		ne(def, "rate_limit_except_level", "CRITICAL", "used only with rate_limit_interval, which is refused"),
		refBool(def, "use_eventlog", "the Windows event log does not exist here"),
		refBool(def, "fatal_deprecations", "ovs-agent reads no deprecated option"),

		// [agent]
		h(agent, "polling_interval", "2"),
		h(agent, "tunnel_types", ""),
		h(agent, "vxlan_udp_port", "4789"),
		h(agent, "l2_population", "False"),
		h(agent, "arp_responder", "False"),
		h(agent, "dont_fragment", "True"),
		h(agent, "enable_distributed_routing", "False"),
		h(agent, "drop_flows_on_start", "False"),
		h(agent, "tunnel_csum", "False"),
		refBool(agent, "baremetal_smartnic", "smart-NIC baremetal ports are "+notYet),
		h(agent, "explicitly_egress_direct", "False"),
		h(agent, "dscp", ""),
		h(agent, "dscp_inherit", "False"),
		h(agent, "quitting_rpc_timeout", "10"),
		h(agent, "report_interval", "30"),
		h(agent, "log_agent_heartbeats", "False"),
		part(agent, "extensions", "", "qos is honoured (its effect: TestQoSExtension in test/e2e); log, fdb, local_ip, dhcp and metadata_path are "+notYet, "log",
			func(v string, _ *Raw) bool {
				for _, e := range splitList(v) {
					if e != "qos" {
						return false
					}
				}
				return true
			}),
		ne(agent, "minimize_polling", "True", noMonitor),
		ne(agent, "ovsdb_monitor_respawn_interval", "30", noMonitor),
		ne(agent, "veth_mtu", "9000", "ovs-agent makes no veth pairs (patch ports only, as the reference since Stein)"),
		ne(agent, "root_helper", "sudo", noHelper),
		ne(agent, "root_helper_daemon", "", noHelper),
		ne(agent, "use_helper_for_ns_read", "True", noHelper),

		// [ovs]
		h(ovs, "integration_bridge", "br-int"),
		h(ovs, "tunnel_bridge", "br-tun"),
		h(ovs, "int_peer_patch_port", "patch-tun"),
		h(ovs, "tun_peer_patch_port", "patch-int"),
		h(ovs, "local_ip", ""),
		h(ovs, "bridge_mappings", ""),
		h(ovs, "datapath_type", "system"),
		h(ovs, "vhostuser_socket_dir", "/var/run/openvswitch"),
		ne(ovs, "of_listen_address", "127.0.0.1", "ovs-agent speaks OpenFlow over each bridge's management socket and opens no listener"),
		ne(ovs, "of_listen_port", "6633", "ovs-agent speaks OpenFlow over each bridge's management socket and opens no listener"),
		h(ovs, "of_connect_timeout", "300"),
		h(ovs, "of_request_timeout", "300"),
		h(ovs, "of_inactivity_probe", "10"),
		ne(ovs, "openflow_processed_per_port", "False", "ovs-agent always applies a bridge's changes in one bundle"),
		part(ovs, "ovsdb_connection", "tcp:127.0.0.1:6640", ovsdbTLS, "ssl:127.0.0.1:6640",
			func(v string, _ *Raw) bool { return !strings.HasPrefix(strings.TrimSpace(v), "ssl:") }),
		refEmpty(ovs, "ssl_key_file", ovsdbTLS, "/etc/neutron/ovsdb.key"),
		refEmpty(ovs, "ssl_cert_file", ovsdbTLS, "/etc/neutron/ovsdb.pem"),
		refEmpty(ovs, "ssl_ca_cert_file", ovsdbTLS, "/etc/neutron/ovsdb-ca.pem"),
		ne(ovs, "ovsdb_debug", "False", "ovs-agent has no ovsdbapp to debug; debug = True logs its OVSDB work"),
		h(ovs, "ovsdb_timeout", "10"),
		h(ovs, "bridge_mac_table_size", "50000"),
		h(ovs, "igmp_snooping_enable", "False"),
		h(ovs, "igmp_flood", "False"),
		h(ovs, "igmp_flood_reports", "True"),
		h(ovs, "igmp_flood_unregistered", "False"),
		h(ovs, "resource_provider_bandwidths", ""),
		h(ovs, "resource_provider_hypervisors", ""),
		h(ovs, "resource_provider_default_hypervisor", ""),
		h(ovs, "resource_provider_inventory_defaults", "allocation_ratio:1.0,min_unit:1,step_size:1,reserved:0"),
		h(ovs, "resource_provider_packet_processing_without_direction", ""),
		h(ovs, "resource_provider_packet_processing_with_direction", ""),
		h(ovs, "resource_provider_packet_processing_inventory_defaults", "allocation_ratio:1.0,min_unit:1,step_size:1,reserved:0"),
		h(ovs, "qos_meter_bandwidth", "False"),
		h(ovs, "trunk_enabled", "True"),

		// [securitygroup]
		part(sg, "firewall_driver", "", "the iptables_hybrid driver is "+notYet+" (openvswitch and noop are)", "iptables_hybrid",
			func(v string, all *Raw) bool {
				n, ok := normalizeFirewall(v)
				sgOn, set := all.Lookup("securitygroup", "enable_security_group")
				// With security groups off the reference runs the noop driver whatever this says.
				return !ok || n != FirewallIptablesHybrid || (set && isFalse(sgOn, all))
			}),
		h(sg, "enable_security_group", "True"),
		ne(sg, "enable_ipset", "True", "used only by the iptables drivers"),
		h(sg, "permitted_ethertypes", ""),

		// [network_log]
		ne(nlog, "rate_limit", "100", logExt),
		ne(nlog, "burst_limit", "25", logExt),
		ne(nlog, "local_output_log_base", "", logExt),

		// [oslo_messaging_rabbit]
		h(rabbit, "ssl", "False"),
		h(rabbit, "ssl_ca_file", ""),
		h(rabbit, "ssl_cert_file", ""),
		h(rabbit, "ssl_key_file", ""),
		part(rabbit, "ssl_version", "", "SSLv23 (TLS 1.2 or 1.3) and TLSv1_2 (TLS 1.2 only) are honoured; TLSv1, TLSv1_1, SSLv2 and SSLv3 are not offered by ovs-agent (nor by the reference host's OpenSSL)", "TLSv1", isOneOf("", "SSLv23", "TLSv1_2")),
		refBool(rabbit, "ssl_enforce_fips_mode", "FIPS mode is "+notYet),
		h(rabbit, "ssl_enforce_hostname_verification", "False"),
		h(rabbit, "heartbeat_timeout_threshold", "60"),
		ne(rabbit, "heartbeat_rate", "2", "ovs-agent's AMQP client beats every heartbeat_timeout_threshold / 2 whatever the rate (the reference's default was 2, is 3 since oslo.messaging 14.x); the broker sees the same negotiated timeout"),
		ne(rabbit, "heartbeat_in_pthread", "False", "ovs-agent's heartbeats run on their own goroutine whatever this says"),
		h(rabbit, "rabbit_retry_interval", "1"),
		h(rabbit, "rabbit_retry_backoff", "2"),
		h(rabbit, "rabbit_interval_max", "30"),
		h(rabbit, "rabbit_transient_queues_ttl", "1800"),
		h(rabbit, "rabbit_qos_prefetch_count", "0"),
		h(rabbit, "amqp_durable_queues", "False"),
		h(rabbit, "amqp_auto_delete", "False"),
		h(rabbit, "rabbit_ha_queues", "False"),
		h(rabbit, "rabbit_quorum_queue", "False"),
		h(rabbit, "rabbit_transient_quorum_queue", "False"),
		h(rabbit, "rabbit_stream_fanout", "False"),
		h(rabbit, "use_queue_manager", "False"),
		h(rabbit, "rabbit_quorum_delivery_limit", "0"),
		h(rabbit, "rabbit_quorum_max_memory_length", "0"),
		h(rabbit, "rabbit_quorum_max_memory_bytes", "0"),
		h(rabbit, "rabbit_quroum_max_memory_length", "0"),
		h(rabbit, "rabbit_quroum_max_memory_bytes", "0"),
		h(rabbit, "hostname", "<hostname>"),
		h(rabbit, "processname", "<program name>"),
		ne(rabbit, "kombu_reconnect_delay", "1.0", "ovs-agent reconnects after rabbit_retry_interval and rabbit_retry_backoff"),
		ne(rabbit, "kombu_reconnect_splay", "0.0", "ovs-agent reconnects after rabbit_retry_interval and rabbit_retry_backoff"),
		refEmpty(rabbit, "kombu_compression", "compressed messages are "+notYet, "gzip"),
		ne(rabbit, "kombu_missing_consumer_retry_timeout", "60", "ovs-agent consumes no reply to a call it did not make"),
		part(rabbit, "kombu_failover_strategy", "round-robin", "ovs-agent tries the brokers of transport_url in order (round-robin); shuffle is "+notYet, "shuffle", isOneOf("round-robin")),
		part(rabbit, "rabbit_login_method", "AMQPLAIN", "ovs-agent logs in with user and password (PLAIN or AMQPLAIN, the same credentials); RABBIT-CR-DEMO is "+notYet, "RABBIT-CR-DEMO", isOneOf("AMQPLAIN", "PLAIN")),
		ne(rabbit, "direct_mandatory_flag", "True", "ovs-agent replies with the mandatory flag and drops a reply nobody waits for"),
		h(rabbit, "enable_cancel_on_failover", "False"),
		ne(rabbit, "rpc_conn_pool_size", "30", noPool),
		ne(rabbit, "conn_pool_min_size", "2", noPool),
		ne(rabbit, "conn_pool_ttl", "1200", noPool),

		// [ml2]: the one option of it the reference agent reads (2026.2).
		h("ml2", "tunnelled_network_rp_name", "rp_tunnelled"),

		// [ovsagent]: ovs-agent's own additions, ignored by the reference.
		h(own, "metrics_listen", DefaultMetricsListen),
		h(own, "explain_endpoint", "False"),
		h(own, "batch_window_ms", "10"),
		h(own, "device_list_chunk_size", "0"),
		h(own, "memory_limit_mib", "0"),
		h(own, "debug_pprof", "False"),
		h(own, "debug_pprof_any_address", "False"),
	}
	for i := range rows {
		rows[i].Proof = optionProofs[rows[i].Section+"."+rows[i].Name]
	}
	return rows
}()

// optionProofs maps section.name of a Honoured row to a test showing its
// effect (issue 15); 59 of the 86 rows so far. Where the named test is the adapter's (openflow, oslo,
// ovsdb), it shows what the setting does there. Rows missing here have no
// such test yet.
var optionProofs = map[string]string{
	"DEFAULT.use_stderr":                                "TestUseStderrLines",
	"agent.log_agent_heartbeats":                        "TestReportCarriesOptions",
	"ovs.vhostuser_socket_dir":                          "TestReportCarriesOptions",
	"ovs.ovsdb_timeout":                                 "TestTimeoutBoundsOperations",
	"oslo_messaging_rabbit.heartbeat_timeout_threshold": "TestHeartbeatNegotiated",
	"oslo_messaging_rabbit.rabbit_retry_interval":       "TestRetryDelaysFollowOptions",
	"oslo_messaging_rabbit.rabbit_retry_backoff":        "TestRetryDelaysFollowOptions",
	"oslo_messaging_rabbit.rabbit_interval_max":         "TestRetryDelaysFollowOptions",
	"oslo_messaging_rabbit.rabbit_transient_queues_ttl": "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.enable_cancel_on_failover":   "TestConsumerArgsCancelOnFailover",
	"DEFAULT.use_json":                                  "TestUseJSONAndDebugLines",
	"DEFAULT.debug":                                     "TestUseJSONAndDebugLines",
	"DEFAULT.syslog_log_facility":                       "TestUseSyslog",
	"DEFAULT.rpc_resources_processing_step":             "TestUpdateDeviceListChunksAndMerges",
	"DEFAULT.host":                                      "TestInteropRealServer",
	"agent.report_interval":                             "TestReporterRun",
	"ovsagent.debug_pprof_any_address":                  "TestBadConfigs",
	"ovs.integration_bridge":                            "TestBridgeOptionsTakeEffect",
	"ovs.tunnel_bridge":                                 "TestBridgeOptionsTakeEffect",
	"ovs.int_peer_patch_port":                           "TestBridgeOptionsTakeEffect",
	"ovs.tun_peer_patch_port":                           "TestBridgeOptionsTakeEffect",
	"ovs.datapath_type":                                 "TestBridgeOptionsTakeEffect",
	"ovs.bridge_mac_table_size":                         "TestBridgeOptionsTakeEffect",
	"ovs.igmp_snooping_enable":                          "TestBridgeOptionsTakeEffect",
	"ovs.trunk_enabled":                                 "TestTrunkEnabledBuildsTheHandler",
	"ovs.igmp_flood":                                    "TestBridgeOptionsTakeEffect",
	"ovs.igmp_flood_reports":                            "TestBridgeOptionsTakeEffect",
	"ovs.igmp_flood_unregistered":                       "TestBridgeOptionsTakeEffect",
	"DEFAULT.transport_url":                             "TestBinaryPasswordDollarAndReady",
	"securitygroup.permitted_ethertypes":                "TestGoldenTables",
	"DEFAULT.control_exchange":                          "TestDurableControlExchangeAccepted",
	"DEFAULT.rpc_response_timeout":                      "TestCallTimeoutBackoff",
	"DEFAULT.rpc_response_max_timeout":                  "TestCallTimeoutBackoff",
	"DEFAULT.log_file":                                  "TestLogFileNoFollow",
	"DEFAULT.log_dir":                                   "TestLogDirAlone",
	"DEFAULT.use_syslog":                                "TestUseSyslog",
	"DEFAULT.use_journal":                               "TestUseJournal",

	"agent.polling_interval":           "TestAgentOptionsCanaryInterval",
	"agent.tunnel_types":               "TestTunnelPortFlows",
	"agent.vxlan_udp_port":             "TestTunnelOptions",
	"agent.dont_fragment":              "TestTunnelOptions",
	"agent.tunnel_csum":                "TestTunnelOptions",
	"agent.dscp":                       "TestTunnelOptions",
	"agent.dscp_inherit":               "TestTunnelOptions",
	"agent.l2_population":              "TestSubscriptions",
	"agent.arp_responder":              "TestTunBaseWithARPResponder",
	"agent.enable_distributed_routing": "TestDVRFeatureWiring",
	"agent.drop_flows_on_start":        "TestDropFlowsOnStart",
	"agent.explicitly_egress_direct":   "TestScenarioExplicitlyEgressDirect",
	"agent.quitting_rpc_timeout":       "TestStopLetsCallInFlightFinishWithinQuitGrace",

	"ovs.local_ip":                                               "TestTunnelOptions",
	"ovs.bridge_mappings":                                        "TestVLANNetworkOnPhysicalBridge",
	"ovs.of_connect_timeout":                                     "TestOFConnectTimeoutBoundsFirstConnection",
	"ovs.of_request_timeout":                                     "TestRequestsTimeOutOnSilentSwitch",
	"ovs.of_inactivity_probe":                                    "TestInactivityProbeDropsSilentSwitch",
	"ovs.resource_provider_bandwidths":                           "TestReportStatePlacementAsReference",
	"ovs.resource_provider_hypervisors":                          "TestReportStatePlacementAsReference",
	"ovs.resource_provider_default_hypervisor":                   "TestReportStatePlacementAsReference",
	"ovs.resource_provider_inventory_defaults":                   "TestReportStatePlacementAsReference",
	"ovs.resource_provider_packet_processing_without_direction":  "TestReportStatePlacementAsReference",
	"ovs.resource_provider_packet_processing_with_direction":     "TestReportStatePlacementAsReference",
	"ovs.resource_provider_packet_processing_inventory_defaults": "TestReportStatePlacementAsReference",

	"securitygroup.enable_security_group": "TestOVSFirewallEntryFlows",

	// a VM's TCP transfer held to a 10 Mbit/s egress meter (test/e2e, against the real server)
	"ovs.qos_meter_bandwidth": "TestQoSExtension",

	"oslo_messaging_rabbit.ssl":                               "TestBrokerTLSDecision",
	"oslo_messaging_rabbit.ssl_ca_file":                       "TestBrokerTLSDecision",
	"oslo_messaging_rabbit.ssl_enforce_hostname_verification": "TestBrokerTLSDecision",
	"oslo_messaging_rabbit.ssl_cert_file":                     "TestRabbitClientCertificate",
	"oslo_messaging_rabbit.ssl_key_file":                      "TestRabbitClientCertificate",
	// The old spellings: TestRabbitQueueOptions maps them into oslo.Queues,
	// whose effect TestDeclareModesMatchOslo shows.
	"oslo_messaging_rabbit.rabbit_quroum_max_memory_length": "TestRabbitQueueOptions",
	"oslo_messaging_rabbit.rabbit_quroum_max_memory_bytes":  "TestRabbitQueueOptions",
	"oslo_messaging_rabbit.rabbit_qos_prefetch_count":       "TestPrefetchHonoured",
	"oslo_messaging_rabbit.amqp_durable_queues":             "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.amqp_auto_delete":                "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.rabbit_ha_queues":                "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.rabbit_quorum_queue":             "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.rabbit_transient_quorum_queue":   "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.rabbit_stream_fanout":            "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.use_queue_manager":               "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.rabbit_quorum_delivery_limit":    "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.rabbit_quorum_max_memory_length": "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.rabbit_quorum_max_memory_bytes":  "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.hostname":                        "TestDeclareModesMatchOslo",
	"oslo_messaging_rabbit.processname":                     "TestDeclareModesMatchOslo",

	"ml2.tunnelled_network_rp_name": "TestReportStatePlacementAsReference",

	"ovsagent.metrics_listen":         "TestMetricsListenerMountsOnlyWhatIsAsked",
	"ovsagent.explain_endpoint":       "TestMetricsListenerMountsOnlyWhatIsAsked",
	"ovsagent.debug_pprof":            "TestPprofMountedOnlyWhenAsked",
	"ovsagent.memory_limit_mib":       "TestApplyMemoryLimit",
	"ovsagent.batch_window_ms":        "TestIdleAgentAppliesAtOnce",
	"ovsagent.device_list_chunk_size": "TestUpdateDeviceListChunksAndMerges",
}

// OptionTable lists the option table (sorted by section order, then name).
func OptionTable() []OptionInfo {
	out := append([]OptionInfo(nil), optionTable...)
	order := map[string]int{"DEFAULT": 0, "agent": 1, "ovs": 2, "securitygroup": 3, "network_log": 4, "oslo_messaging_rabbit": 5, "ovsagent": 6, "ml2": 7}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Section != out[j].Section {
			return order[out[i].Section] < order[out[j].Section]
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// RefusedError is an option set to a value ovs-agent does not implement.
type RefusedError struct {
	Option string // section.key
	Value  string
	Why    string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("config: %s = %q is %s: %s", e.Option, e.Value, notYet, oneLine(e.Why))
}

// checkSupport refuses every option set to a value the table does not let
// through. This is the one place where "honoured or refused" is decided.
func checkSupport(raw *Raw) error {
	for _, o := range OptionTable() {
		if o.Accept == nil {
			continue
		}
		v, ok := raw.Lookup(o.Section, o.Name)
		if !ok {
			continue
		}
		if o.Default == "False" || o.Default == "True" {
			if _, isBool := parseBool(v); !isBool {
				return &Error{Option: raw.origin(o.Section, o.Name), Value: v, Reason: "not a boolean (true/false, yes/no, on/off, 1/0)"}
			}
		}
		if raw.err != nil {
			return raw.err
		}
		if o.Accept(v, raw) {
			continue
		}
		return &RefusedError{Option: raw.origin(o.Section, o.Name), Value: v, Why: o.Why}
	}
	return raw.err
}
