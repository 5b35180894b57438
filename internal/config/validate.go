package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

// HostAddrsFunc lists the IP addresses of this host's interfaces.
type HostAddrsFunc func() ([]net.IP, error)

// SystemHostAddrs reads the addresses of the interfaces in the current
// network namespace.
func SystemHostAddrs() ([]net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []net.IP
	for _, a := range addrs {
		switch v := a.(type) {
		case *net.IPNet:
			out = append(out, v.IP)
		case *net.IPAddr:
			out = append(out, v.IP)
		}
	}
	return out, nil
}

// Options adjust Load; the zero value uses the real host.
type Options struct {
	// HostAddrs replaces the interface lookup used to check ovs.local_ip.
	HostAddrs HostAddrsFunc
	// CommandLine holds the options given on the command line (oslo.log's
	// --debug, --log-file, ...); they win over the environment and files.
	CommandLine []Value
}

// Value is one option set on the command line.
type Value struct {
	Section, Key, Value string
}

// Load reads the sources in order (oslo.config semantics: the last value
// wins), applies the reference defaults and validates the result.
func Load(sources []Source, opts Options) (*Config, error) {
	raw, err := ReadSources(sources)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	for _, v := range opts.CommandLine {
		raw.SetCommandLine(v.Section, v.Key, v.Value)
	}
	return loadRaw(raw, opts)
}

// loadRaw is Load after reading: the transport_url query, types, the option
// table, validation.
func loadRaw(raw *Raw, opts Options) (*Config, error) {
	if err := raw.applyTransportQuery(); err != nil {
		return nil, err
	}
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if err := checkSupport(raw); err != nil {
		return nil, err
	}
	if err := c.Validate(opts.HostAddrs); err != nil {
		return nil, err
	}
	return c, nil
}

var tunnelTypes = map[string]bool{"gre": true, "vxlan": true, "geneve": true}

// Validate checks what the reference agent checks at start-up (tunnel
// configuration, mappings, choices) plus the transport_url. hostAddrs nil
// means SystemHostAddrs.
func (c *Config) Validate(hostAddrs HostAddrsFunc) error {
	if hostAddrs == nil {
		hostAddrs = SystemHostAddrs
	}
	if err := validHost(c.Default.Host); err != nil {
		return &Error{Option: "DEFAULT.host", Value: c.Default.Host, Reason: err.Error()}
	}
	if strings.TrimSpace(c.Default.TransportURL) == "" {
		return &Error{Option: "DEFAULT.transport_url", Unset: true, Reason: "the agent needs rabbit://user:pass@host:5672/"}
	}
	t, err := oslo.ParseTransportURL(c.Default.TransportURL)
	if err != nil {
		return &Error{Option: "DEFAULT.transport_url", Value: MaskTransportURL(c.Default.TransportURL),
			Reason: strings.TrimPrefix(err.Error(), "transport_url: ")}
	}
	c.Default.Transport = t
	if strings.TrimSpace(c.Default.ControlExchange) == "" {
		return &Error{Option: "DEFAULT.control_exchange", Value: c.Default.ControlExchange, Reason: "must not be empty"}
	}
	if c.Default.RPCResponseMaxTimeout < c.Default.RPCResponseTimeout {
		return &Error{Option: "DEFAULT.rpc_response_max_timeout", Value: secs(c.Default.RPCResponseMaxTimeout.Seconds()),
			Reason: "must be >= DEFAULT.rpc_response_timeout " + secs(c.Default.RPCResponseTimeout.Seconds())}
	}

	if err := c.RabbitQueues().Validate(); err != nil {
		// oslo.messaging refuses the same combinations when it starts.
		opt := "oslo_messaging_rabbit.rabbit_stream_fanout"
		if c.Rabbit.HAQueues && c.Rabbit.QuorumQueue {
			opt = "oslo_messaging_rabbit.rabbit_ha_queues"
		}
		return &Error{Option: opt, Value: "True", Reason: err.Error()}
	}

	for _, tt := range c.Agent.TunnelTypes {
		if !tunnelTypes[tt] {
			return &Error{Option: "agent.tunnel_types", Value: strings.Join(c.Agent.TunnelTypes, ","),
				Reason: fmt.Sprintf("unknown tunnel type %q (gre, vxlan, geneve)", tt)}
		}
	}
	// _check_agent_configurations: "DVR deployments for VXLAN/GRE/Geneve
	// underlays require L2-pop to be enabled" (a ValueError at the reference's start)
	if c.Agent.EnableDistributedRouting && c.TunnelingEnabled() && !c.Agent.L2Population {
		return &Error{Option: "agent.enable_distributed_routing", Value: "True",
			Reason: "with agent.tunnel_types it requires agent.l2_population = True (as the reference)"}
	}
	o := &c.OVS
	if o.LocalIP != "" && net.ParseIP(o.LocalIP) == nil {
		return &Error{Option: "ovs.local_ip", Value: o.LocalIP, Reason: "not an IP address"}
	}
	if c.TunnelingEnabled() {
		if o.LocalIP == "" {
			return &Error{Option: "ovs.local_ip", Unset: true, Reason: "required when agent.tunnel_types is set"}
		}
		if err := onThisHost(o.LocalIP, hostAddrs); err != nil {
			return &Error{Option: "ovs.local_ip", Value: o.LocalIP, Reason: err.Error()}
		}
	}

	for key, name := range map[string]string{
		"integration_bridge": o.IntegrationBridge, "tunnel_bridge": o.TunnelBridge,
		"int_peer_patch_port": o.IntPeerPatchPort, "tun_peer_patch_port": o.TunPeerPatchPort,
	} {
		if name == "" || strings.ContainsAny(name, " \t\n/") {
			return &Error{Option: "ovs." + key, Value: name, Reason: "not a valid OVS name"}
		}
		if (key == "integration_bridge" || key == "tunnel_bridge") && len(name) > maxBridgeName {
			return &Error{Option: "ovs." + key, Value: name, Reason: fmt.Sprintf("longer than %d characters (a bridge is a network device)", maxBridgeName)}
		}
	}
	if o.IntegrationBridge == o.TunnelBridge {
		return &Error{Option: "ovs.tunnel_bridge", Value: o.TunnelBridge, Reason: "same as ovs.integration_bridge"}
	}
	for _, m := range o.BridgeMappings {
		if m.Bridge == o.IntegrationBridge || (c.TunnelingEnabled() && m.Bridge == o.TunnelBridge) {
			return &Error{Option: "ovs.bridge_mappings", Value: m.Physnet + ":" + m.Bridge,
				Reason: fmt.Sprintf("bridge %s is the agent's own integration or tunnel bridge", m.Bridge)}
		}
	}
	if o.DatapathType != "system" && o.DatapathType != "netdev" {
		return &Error{Option: "ovs.datapath_type", Value: o.DatapathType, Reason: "must be system or netdev"}
	}
	if err := validOVSDBConnection(o.OVSDBConnection); err != nil {
		return &Error{Option: "ovs.ovsdb_connection", Value: o.OVSDBConnection, Reason: err.Error()}
	}

	if l := c.OVSAgent.MetricsListen; l != "" {
		host, port, err := net.SplitHostPort(l)
		if err != nil {
			return &Error{Option: "ovsagent.metrics_listen", Value: l, Reason: "not host:port"}
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return &Error{Option: "ovsagent.metrics_listen", Value: l, Reason: "bad port"}
		}
		if host != "" && net.ParseIP(host) == nil && validHost(host) != nil {
			return &Error{Option: "ovsagent.metrics_listen", Value: l, Reason: "bad host"}
		}
		// The profiles show the agent's memory (tenant data, the broker's
		// password): served beyond loopback only when asked in so many words.
		if c.OVSAgent.DebugPprof && !c.OVSAgent.DebugPprofAnyAddress && !loopbackHost(host) {
			return &Error{Option: "ovsagent.debug_pprof", Value: "True",
				Reason: fmt.Sprintf("metrics_listen %s is not a loopback address; set debug_pprof_any_address = True to serve the profiles there", l)}
		}
	}
	return nil
}

// loopbackHost: host (of host:port) names only loopback addresses. ""
// (every address) and names other than localhost are not: a name is not
// resolved at load, and may resolve elsewhere later.
func loopbackHost(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return strings.EqualFold(host, "localhost")
}

func secs(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func onThisHost(ip string, hostAddrs HostAddrsFunc) error {
	want := net.ParseIP(ip)
	addrs, err := hostAddrs()
	if err != nil {
		return fmt.Errorf("cannot list this host's addresses: %s", oneLine(err.Error()))
	}
	for _, a := range addrs {
		if a.Equal(want) {
			return nil
		}
	}
	return fmt.Errorf("not an address of any interface of this host (tunnels need it)")
}

// validHost accepts what oslo.config's HostDomainOpt accepts: labels of
// letters, digits, '-' and '_', separated by dots.
func validHost(h string) error {
	if h == "" {
		return fmt.Errorf("must not be empty")
	}
	if len(h) > 255 {
		return fmt.Errorf("longer than 255 characters")
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("bad host name label %q", label)
		}
		for _, r := range label {
			if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return fmt.Errorf("character %q not allowed in a host name", r)
			}
		}
	}
	return nil
}

// validOVSDBConnection accepts ovsdb-server's active connection methods.
func validOVSDBConnection(s string) error {
	method, rest, found := strings.Cut(s, ":")
	if !found || rest == "" {
		return fmt.Errorf("want tcp:IP:PORT, ssl:IP:PORT or unix:PATH")
	}
	switch method {
	case "unix":
		return nil
	case "tcp", "ssl":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return fmt.Errorf("want %s:IP:PORT", method)
		}
		if net.ParseIP(host) == nil {
			return fmt.Errorf("%q is not an IP address", host)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("bad port %q", port)
		}
		return nil
	}
	return fmt.Errorf("unknown method %q (tcp, ssl, unix)", method)
}

// maxBridgeName is IFNAMSIZ-1: a bridge is also a network device (its internal port),
// and OVS refuses longer names, so the agent would otherwise retry its bridge setup forever.
const maxBridgeName = 15
