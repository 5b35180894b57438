package neutron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Agent identity the ML2 openvswitch mechanism driver looks for.
const (
	AgentBinary = "neutron-openvswitch-agent"
	AgentType   = "Open vSwitch agent"
)

// report_state answers.
const (
	ReportNew     = "new"
	ReportAlive   = "alive"
	ReportRevived = "revived" // the server had us dead: do a full resync
)

// OVSCapabilities are the datapath and interface types of the Open_vSwitch row.
type OVSCapabilities struct {
	DatapathTypes []string `json:"datapath_types"`
	IfaceTypes    []string `json:"iface_types"`
}

// InventoryDefaults is a placement inventory default set.
type InventoryDefaults struct {
	AllocationRatio float64 `json:"allocation_ratio"`
	MinUnit         int     `json:"min_unit"`
	Reserved        int     `json:"reserved"`
	StepSize        int     `json:"step_size"`
}

// DefaultInventoryDefaults is the reference's default for both inventory-default options.
var DefaultInventoryDefaults = InventoryDefaults{AllocationRatio: 1.0, MinUnit: 1, Reserved: 0, StepSize: 1}

// AgentConfigurations is report_state's configurations dict (spec §2.2). The ML2
// openvswitch driver binds ports from bridge_mappings, tunnel_types, integration_bridge,
// datapath_type, ovs_capabilities, vhostuser_socket_dir and ovs_hybrid_plug, so these
// must be right. Nil maps and slices are sent as {} and [].
type AgentConfigurations struct {
	BridgeMappings                                    map[string]string `json:"bridge_mappings"`
	ResourceProviderBandwidths                        map[string]any    `json:"resource_provider_bandwidths"`
	ResourceProviderInventoryDefaults                 any               `json:"resource_provider_inventory_defaults"` // nil: DefaultInventoryDefaults
	ResourceProviderPacketProcessingWithoutDirection  map[string]any    `json:"resource_provider_packet_processing_without_direction"`
	ResourceProviderPacketProcessingWithDirection     map[string]any    `json:"resource_provider_packet_processing_with_direction"`
	ResourceProviderPacketProcessingInventoryDefaults any               `json:"resource_provider_packet_processing_inventory_defaults"` // nil: DefaultInventoryDefaults
	ResourceProviderHypervisors                       map[string]string `json:"resource_provider_hypervisors"`
	IntegrationBridge                                 string            `json:"integration_bridge"`
	TunnelTypes                                       []string          `json:"tunnel_types"`
	TunnelingIP                                       string            `json:"-"` // null when empty
	L2Population                                      bool              `json:"l2_population"`
	ARPResponderEnabled                               bool              `json:"arp_responder_enabled"`
	EnableDistributedRouting                          bool              `json:"enable_distributed_routing"`
	LogAgentHeartbeats                                bool              `json:"log_agent_heartbeats"`
	Extensions                                        []string          `json:"extensions"`
	DatapathType                                      string            `json:"datapath_type"`
	OVSCapabilities                                   OVSCapabilities   `json:"ovs_capabilities"`
	VhostuserSocketDir                                string            `json:"vhostuser_socket_dir"`
	OVSHybridPlug                                     bool              `json:"ovs_hybrid_plug"`
	BaremetalSmartnic                                 bool              `json:"baremetal_smartnic"`
	Devices                                           int               `json:"devices"`
	InDistributedMode                                 bool              `json:"in_distributed_mode"`
	// Extra are the agent features' keys (feature.Reporter), merged into
	// the object; a key the fields above already write is not overwritten.
	Extra map[string]any `json:"-"`
}

// MarshalJSON implements json.Marshaler with the reference's null/empty conventions.
func (c AgentConfigurations) MarshalJSON() ([]byte, error) {
	type plain AgentConfigurations
	p := plain(c)
	if p.BridgeMappings == nil {
		p.BridgeMappings = map[string]string{}
	}
	if p.ResourceProviderBandwidths == nil {
		p.ResourceProviderBandwidths = map[string]any{}
	}
	if p.ResourceProviderPacketProcessingWithoutDirection == nil {
		p.ResourceProviderPacketProcessingWithoutDirection = map[string]any{}
	}
	if p.ResourceProviderPacketProcessingWithDirection == nil {
		p.ResourceProviderPacketProcessingWithDirection = map[string]any{}
	}
	// The inventory defaults are any: the options keep only the keys the
	// operator wrote (config.InventoryDefaults), as the reference sends them.
	if p.ResourceProviderInventoryDefaults == nil {
		p.ResourceProviderInventoryDefaults = DefaultInventoryDefaults
	}
	if p.ResourceProviderPacketProcessingInventoryDefaults == nil {
		p.ResourceProviderPacketProcessingInventoryDefaults = DefaultInventoryDefaults
	}
	if p.ResourceProviderHypervisors == nil {
		p.ResourceProviderHypervisors = map[string]string{}
	}
	if p.TunnelTypes == nil {
		p.TunnelTypes = []string{}
	}
	if p.Extensions == nil {
		p.Extensions = []string{}
	}
	if p.OVSCapabilities.DatapathTypes == nil {
		p.OVSCapabilities.DatapathTypes = []string{}
	}
	if p.OVSCapabilities.IfaceTypes == nil {
		p.OVSCapabilities.IfaceTypes = []string{}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	// Append tunneling_ip (string or null) to the object.
	tip := []byte("null")
	if c.TunnelingIP != "" {
		tip, _ = json.Marshal(c.TunnelingIP)
	}
	out := append(b[:len(b)-1:len(b)-1], []byte(`,"tunneling_ip":`)...)
	out = append(out, tip...)
	if len(c.Extra) > 0 {
		var err error
		if out, err = mergeExtra(append(out, '}'), c.Extra); err != nil {
			return nil, err
		}
		return out, nil
	}
	return append(out, '}'), nil
}

// AgentState is the agent_state dict of report_state.
type AgentState struct {
	Binary           string              `json:"binary"`
	Host             string              `json:"host"`
	Topic            string              `json:"topic"`
	AgentType        string              `json:"agent_type"`
	StartFlag        bool                `json:"start_flag,omitempty"`
	ResourceVersions map[string]string   `json:"resource_versions,omitempty"`
	UUID             string              `json:"uuid"`
	Configurations   AgentConfigurations `json:"configurations"`
}

// ReportTimeFormat is report_state's time argument (datetime.utcnow().strftime).
const ReportTimeFormat = "2006-01-02T15:04:05.000000"

// ReportState sends one report_state call (q-reports-plugin 1.2) with the given timeout
// (the reference uses report_interval) and returns the server's answer ("new", "alive",
// "revived", or "" when the server found the report older than its own start).
func (c *Client) ReportState(ctx context.Context, st AgentState, timeout time.Duration) (string, error) {
	if st.UUID == "" {
		st.UUID = uuid.NewString()
	}
	args := map[string]any{
		"agent_state": map[string]any{"agent_state": st},
		"time":        time.Now().UTC().Format(ReportTimeFormat),
	}
	var res *string
	if err := c.call(ctx, reportsTarget("1.2"), "report_state", args, timeout, &res); err != nil {
		return "", err
	}
	if res == nil {
		return "", nil
	}
	return *res, nil
}

// ErrReportSkipped is returned by ReportOnce when Configurations says not ready.
var ErrReportSkipped = errors.New("neutron: report_state skipped: agent not ready")

// Reporter sends report_state every Interval, like the reference's heartbeat loop.
type Reporter struct {
	Client   *Client
	Interval time.Duration
	// Configurations returns the current configurations; ok false skips this report
	// (the reference does not report while OVS is dead).
	Configurations func() (cfg AgentConfigurations, ok bool)
	// Synced reports whether the agent finished its first full sync; start_flag is kept
	// until a successful report made after that (the reference's iter_num > 0). Nil means
	// always synced: start_flag only on the first successful report.
	Synced func() bool
	// OnReport, if set, receives every outcome ("revived" asks for a full resync).
	OnReport func(result string, err error)
	// ResourceVersions, if set, gives the resource_versions map and its generation
	// (Negotiator.Reported); nil reports ReportedResourceVersions. Like the reference,
	// the map goes with the first successful report only; unlike it, again after its
	// generation changed (a version agreed with the server later, versions.go).
	ResourceVersions func() (map[string]string, uint64)

	mu           sync.Mutex
	startFlag    bool
	versionsSent bool
	sentGen      uint64
	initDone     bool
	kick         chan struct{}
}

func (r *Reporter) init() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.initDone {
		r.initDone = true
		r.startFlag = true
		r.kick = make(chan struct{}, 1)
	}
}

// ForceStartFlag re-adds start_flag and asks for a report now (the reference does this
// after an OVS restart when tunnelling is on).
func (r *Reporter) ForceStartFlag() {
	r.init()
	r.mu.Lock()
	r.startFlag = true
	r.mu.Unlock()
	r.Kick()
}

// Kick asks for a report now (a Run loop sends it; a report already asked for is
// not doubled).
func (r *Reporter) Kick() {
	r.init()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Reporter) versions() (map[string]string, uint64) {
	if r.ResourceVersions == nil {
		return ReportedResourceVersions, 0
	}
	return r.ResourceVersions()
}

// State builds the agent_state the next report would send.
func (r *Reporter) State(cfg AgentConfigurations) AgentState {
	st, _ := r.state(cfg)
	return st
}

// state is State and the generation of the versions it carries.
func (r *Reporter) state(cfg AgentConfigurations) (AgentState, uint64) {
	r.init()
	versions, gen := r.versions()
	r.mu.Lock()
	defer r.mu.Unlock()
	st := AgentState{
		Binary:         AgentBinary,
		Host:           r.Client.Host(),
		Topic:          "N/A",
		AgentType:      AgentType,
		StartFlag:      r.startFlag,
		UUID:           uuid.NewString(),
		Configurations: cfg,
	}
	if !r.versionsSent || gen != r.sentGen {
		st.ResourceVersions = versions
	}
	return st, gen
}

// ReportOnce sends one report now and updates start_flag / resource_versions state.
func (r *Reporter) ReportOnce(ctx context.Context) (string, error) {
	cfg, ok := AgentConfigurations{}, true
	if r.Configurations != nil {
		cfg, ok = r.Configurations()
	}
	if !ok {
		return "", ErrReportSkipped
	}
	synced := r.Synced == nil || r.Synced()
	st, gen := r.state(cfg)
	timeout := r.Interval
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	res, err := r.Client.ReportState(ctx, st, timeout)
	if err == nil {
		r.mu.Lock()
		if st.ResourceVersions != nil {
			r.versionsSent, r.sentGen = true, gen
		}
		if synced {
			r.startFlag = false
		}
		r.mu.Unlock()
	}
	if r.OnReport != nil {
		r.OnReport(res, err)
	}
	return res, err
}

// Run reports immediately and then every Interval until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	r.init()
	interval := r.Interval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if res, err := r.ReportOnce(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrReportSkipped) {
				slog.Debug("neutron: report_state skipped (OVS not connected)")
			} else {
				slog.Warn("neutron: report_state failed", "err", err)
			}
		} else if res == ReportRevived {
			slog.Info("neutron: agent revived by the server; full resync needed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}

// mergeExtra adds extra's keys to the JSON object b, the ones b has left as
// they are (a feature does not override the agent's own keys).
func mergeExtra(b []byte, extra map[string]any) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, ok := obj[k]; ok {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("configurations %q: %w", k, err)
		}
		obj[k] = raw
	}
	return json.Marshal(obj)
}
