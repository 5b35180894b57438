package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// SwitchConfig is the bridge layout the reference builds ([ovs], [agent]).
type SwitchConfig struct {
	Integration, Tunnel        string // Tunnel empty: no tunnelling
	IntPeerPatch, TunPeerPatch string // patch-tun, patch-int
	DatapathType               string
	MACTableSize               int
	IGMP                       ovsdb.IGMP        // [ovs] igmp_*: br-int and its patch ports
	BridgeMappings             map[string]string // physnet → bridge
	VXLANUDPPort               int
	DontFragment, TunnelCsum   bool
	TOS                        string
}

// OVSDBSwitch is Switch over internal/ovsdb.
type OVSDBSwitch struct {
	c      *ovsdb.Client
	cfg    SwitchConfig
	log    *slog.Logger
	mon    *ovsdb.PortMonitor
	events chan PortEvent
	hwOff  bool
}

// NewOVSDBSwitch starts watching the integration bridge's VM ports; the
// first event is the snapshot of the ports present now.
func NewOVSDBSwitch(ctx context.Context, c *ovsdb.Client, cfg SwitchConfig, log *slog.Logger) *OVSDBSwitch {
	if log == nil {
		log = slog.Default()
	}
	s := &OVSDBSwitch{c: c, cfg: cfg, log: log, events: make(chan PortEvent, 256)}
	if sys, err := c.System(ctx); err == nil {
		s.hwOff = sys.HWOffload()
	}
	s.mon = c.WatchPorts(ctx, cfg.Integration)
	go s.pump(ctx)
	return s
}

func vifOf(p ovsdb.VMPort) VIF {
	return VIF{PortID: p.IfaceID, Name: p.Name, MAC: p.AttachedMAC, OFPort: int32(p.Ofport), Tag: p.Tag,
		OtherConfig: maps.Clone(p.OtherConfig), IfaceOtherConfig: maps.Clone(p.IfaceOtherConfig), UUID: p.IfaceUUID}
}

// pump turns the monitor's batches into PortEvents: everything delivered
// until the monitor is synced becomes one snapshot, then deltas follow.
func (s *OVSDBSwitch) pump(ctx context.Context) {
	defer close(s.events)
	in := s.mon.Events()
	initial := map[string]VIF{}
	apply := func(batch []ovsdb.PortEvent) {
		for _, ev := range batch {
			switch ev.Type {
			case ovsdb.PortRemoved:
				delete(initial, ev.Port.Name)
			default:
				initial[ev.Port.Name] = vifOf(ev.Port)
			}
		}
	}
	synced := s.mon.Synced()
wait:
	for {
		select {
		case <-ctx.Done():
			return
		case b, ok := <-in:
			if !ok {
				return
			}
			apply(b)
		case <-synced:
			for {
				select {
				case b, ok := <-in:
					if !ok {
						return
					}
					apply(b)
				default:
					break wait
				}
			}
		}
	}
	snap := make([]VIF, 0, len(initial))
	for _, v := range initial {
		snap = append(snap, v)
	}
	if !s.send(ctx, PortEvent{Kind: PortSnapshot, Snapshot: snap, Seen: time.Now()}) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case b, ok := <-in:
			if !ok {
				return
			}
			now := time.Now()
			for _, ev := range b {
				var out []PortEvent
				switch ev.Type {
				case ovsdb.PortRemoved:
					out = append(out, PortEvent{Kind: PortRemoved, VIF: vifOf(ev.Port), Seen: now})
				case ovsdb.PortUpdated:
					if ev.Old.IfaceID != "" && ev.Old.IfaceID != ev.Port.IfaceID {
						out = append(out, PortEvent{Kind: PortRemoved, VIF: vifOf(ev.Old), Seen: now})
					}
					out = append(out, PortEvent{Kind: PortUpserted, VIF: vifOf(ev.Port), Seen: now})
				default:
					out = append(out, PortEvent{Kind: PortUpserted, VIF: vifOf(ev.Port), Seen: now})
				}
				for _, e := range out {
					if !s.send(ctx, e) {
						return
					}
				}
			}
		}
	}
}

func (s *OVSDBSwitch) send(ctx context.Context, ev PortEvent) bool {
	select {
	case s.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// PortEvents implements Switch.
func (s *OVSDBSwitch) PortEvents() <-chan PortEvent { return s.events }

func (s *OVSDBSwitch) bridgeSpec(name string) ovsdb.BridgeSpec {
	size := s.cfg.MACTableSize
	if size <= 0 {
		size = 50000
	}
	spec := ovsdb.BridgeSpec{
		Name:         name,
		DatapathType: s.cfg.DatapathType,
		FailMode:     ovsdb.FailModeSecure,
		OtherConfig:  map[string]string{"mac-table-size": strconv.Itoa(size), "disable-in-band": "true"},
	}
	if name == s.cfg.Integration {
		snoop := s.cfg.IGMP.Snooping
		spec.McastSnoopingEnable = &snoop
		maps.Copy(spec.OtherConfig, s.cfg.IGMP.BridgeOtherConfig())
	}
	return spec
}

// intPatchPair is the patch pair between br-int (intName) and another
// bridge, with the IGMP flood settings the reference puts on br-int's side.
func (s *OVSDBSwitch) intPatchPair(intName, br, name string) []ovsdb.PatchPort {
	pp := ovsdb.PatchPair(s.cfg.Integration, intName, br, name)
	pp[0].PortOtherConfig = s.cfg.IGMP.PortOtherConfig()
	return pp
}

// CheckPhysicalBridges fails when a bridge_mappings bridge does not exist
// (the reference exits; nothing is changed in OVS before this check).
func (s *OVSDBSwitch) CheckPhysicalBridges(ctx context.Context) error {
	for physnet, br := range s.cfg.BridgeMappings {
		ok, err := s.c.BridgeExists(ctx, br)
		if err != nil {
			return fmt.Errorf("ovsdb: bridge %s: %w", br, err)
		}
		if !ok {
			return fmt.Errorf("bridge_mappings: bridge %s for physical network %s does not exist", br, physnet)
		}
	}
	return nil
}

// SetupBridges implements Switch: br-int, br-tun with its patch pair, and
// every mapped physical bridge with its int-/phy- pair, in two
// transactions, then the patch ofports.
func (s *OVSDBSwitch) SetupBridges(ctx context.Context) (BridgeLayout, error) {
	specs := []ovsdb.BridgeSpec{s.bridgeSpec(s.cfg.Integration)}
	var patches []ovsdb.PatchPort
	if s.cfg.Tunnel != "" {
		specs = append(specs, s.bridgeSpec(s.cfg.Tunnel))
		patches = append(patches, s.intPatchPair(s.cfg.IntPeerPatch, s.cfg.Tunnel, s.cfg.TunPeerPatch)...)
	}
	names := map[string][2]string{}
	for physnet, br := range s.cfg.BridgeMappings {
		specs = append(specs, s.bridgeSpec(br))
		in, ph, err := ovsdb.PhysPatchNames(br)
		if err != nil {
			return BridgeLayout{}, fmt.Errorf("ovsdb: patch names for %s: %w", br, err)
		}
		names[physnet] = [2]string{in, ph}
		patches = append(patches, s.intPatchPair(in, br, ph)...)
	}
	if _, err := s.c.EnsureBridges(ctx, specs...); err != nil {
		return BridgeLayout{}, fmt.Errorf("ovsdb: ensure bridges: %w", err)
	}
	if len(patches) > 0 {
		if _, err := s.c.EnsurePatchPorts(ctx, patches...); err != nil {
			return BridgeLayout{}, fmt.Errorf("ovsdb: ensure patch ports: %w", err)
		}
	}
	ofports := func(br string) (map[string]int, error) {
		ps, err := s.c.BridgePorts(ctx, br)
		if err != nil {
			return nil, fmt.Errorf("ovsdb: ports of %s: %w", br, err)
		}
		m := map[string]int{}
		for _, p := range ps {
			m[p.Name] = p.Ofport
		}
		return m, nil
	}
	need := func(m map[string]int, br, name string) (uint32, error) {
		if of := m[name]; of > 0 {
			return uint32(of), nil
		}
		return 0, fmt.Errorf("ovsdb: %s on %s has no valid ofport", name, br)
	}
	l := BridgeLayout{Integration: s.cfg.Integration, Tunnel: s.cfg.Tunnel, Physical: map[string]PhysBridge{}}
	intPorts, err := ofports(s.cfg.Integration)
	if err != nil {
		return BridgeLayout{}, err
	}
	if s.cfg.Tunnel != "" {
		if l.PatchTun, err = need(intPorts, s.cfg.Integration, s.cfg.IntPeerPatch); err != nil {
			return BridgeLayout{}, err
		}
		tunPorts, err := ofports(s.cfg.Tunnel)
		if err != nil {
			return BridgeLayout{}, err
		}
		if l.PatchInt, err = need(tunPorts, s.cfg.Tunnel, s.cfg.TunPeerPatch); err != nil {
			return BridgeLayout{}, err
		}
	}
	for physnet, br := range s.cfg.BridgeMappings {
		pb := PhysBridge{Bridge: br}
		if pb.IntOFPort, err = need(intPorts, s.cfg.Integration, names[physnet][0]); err != nil {
			return BridgeLayout{}, err
		}
		phPorts, err := ofports(br)
		if err != nil {
			return BridgeLayout{}, err
		}
		if pb.PhyOFPort, err = need(phPorts, br, names[physnet][1]); err != nil {
			return BridgeLayout{}, err
		}
		l.Physical[physnet] = pb
	}
	return l, nil
}

// SetPorts implements Switch (one transaction; vanished ports are skipped,
// their removal event follows).
func (s *OVSDBSwitch) SetPorts(ctx context.Context, ports []PortSetting) error {
	bs := make([]ovsdb.PortBinding, 0, len(ports))
	for _, p := range ports {
		bs = append(bs, ovsdb.PortBinding{Name: p.Name, Tag: int(p.Tag), OtherConfig: p.OtherConfig,
			IfaceOtherConfig: p.IfaceOtherConfig})
	}
	_, missing, err := s.c.SetPortBindings(ctx, bs)
	if err != nil {
		return fmt.Errorf("ovsdb: set port tags: %w", err)
	}
	if len(missing) > 0 {
		s.log.Debug("ovsdb: ports vanished before tagging", "ports", missing)
	}
	return nil
}

func (s *OVSDBSwitch) tunnelSpec(t TunnelPort) ovsdb.TunnelPort {
	return ovsdb.TunnelPort{Bridge: s.cfg.Tunnel, Name: t.Name, Type: t.Type, RemoteIP: t.RemoteIP, LocalIP: t.LocalIP,
		DstPort: s.cfg.VXLANUDPPort, DontFragment: s.cfg.DontFragment, Csum: s.cfg.TunnelCsum, TOS: s.cfg.TOS,
		NoEgressPktMark: s.hwOff}
}

// EnsureTunnelPort implements Switch.
func (s *OVSDBSwitch) EnsureTunnelPort(ctx context.Context, t TunnelPort) (TunnelPort, error) {
	if t.Name == "" {
		name, err := ovsdb.TunnelPortName(t.Type, t.RemoteIP, ovsdb.TunnelHashSHA1)
		if err != nil {
			return t, fmt.Errorf("ovsdb: tunnel port name for %s: %w", t.RemoteIP, err)
		}
		t.Name = name
	}
	if _, err := s.c.EnsureTunnelPorts(ctx, s.tunnelSpec(t)); err != nil {
		return t, fmt.Errorf("ovsdb: tunnel port %s: %w", t.Name, err)
	}
	ps, err := s.c.BridgePorts(ctx, s.cfg.Tunnel)
	if err != nil {
		return t, fmt.Errorf("ovsdb: ports of %s: %w", s.cfg.Tunnel, err)
	}
	for _, p := range ps {
		if p.Name == t.Name {
			t.OFPort = int32(p.Ofport)
			if t.OFPort <= 0 {
				return t, fmt.Errorf("ovsdb: tunnel port %s has no valid ofport (%s)", t.Name, p.Error)
			}
			return t, nil
		}
	}
	return t, fmt.Errorf("ovsdb: tunnel port %s: %w", t.Name, ovsdb.ErrNotFound)
}

// DeleteTunnelPort implements Switch.
func (s *OVSDBSwitch) DeleteTunnelPort(ctx context.Context, t TunnelPort) error {
	if err := s.c.DeletePorts(ctx, s.cfg.Tunnel, t.Name); err != nil {
		return fmt.Errorf("ovsdb: delete tunnel port %s: %w", t.Name, err)
	}
	return nil
}

// DeleteVIFPort implements Switch.
func (s *OVSDBSwitch) DeleteVIFPort(ctx context.Context, name string) error {
	if err := s.c.DeletePorts(ctx, s.cfg.Integration, name); err != nil {
		return fmt.Errorf("ovsdb: delete port %s from %s: %w", name, s.cfg.Integration, err)
	}
	return nil
}

// TunnelPorts implements Switch.
func (s *OVSDBSwitch) TunnelPorts(ctx context.Context) ([]TunnelPort, error) {
	if s.cfg.Tunnel == "" {
		return nil, nil
	}
	ps, err := s.c.BridgePorts(ctx, s.cfg.Tunnel)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: ports of %s: %w", s.cfg.Tunnel, err)
	}
	var out []TunnelPort
	for _, p := range ps {
		typ := p.Type
		if typ == "ip6gre" {
			typ = "gre"
		}
		if typ != "vxlan" && typ != "gre" && typ != "geneve" {
			continue
		}
		out = append(out, TunnelPort{Name: p.Name, Type: typ, RemoteIP: p.Options["remote_ip"], LocalIP: p.Options["local_ip"], OFPort: int32(p.Ofport)})
	}
	return out, nil
}

// ExplainInputs reads, without changing anything, what ExplainOffline
// needs from OVSDB: the bridge layout and the port's VIF.
func (s *OVSDBSwitch) ExplainInputs(ctx context.Context, portID string) (BridgeLayout, VIF, error) {
	ports, err := s.c.VMPorts(ctx, s.cfg.Integration)
	if err != nil {
		return BridgeLayout{}, VIF{}, err
	}
	var vif VIF
	found := false
	for _, p := range ports {
		if p.IfaceID == portID {
			vif, found = vifOf(p), true
		}
	}
	if !found {
		return BridgeLayout{}, VIF{}, fmt.Errorf("explain %s: %w", portID, ErrUnknownPort)
	}
	l := BridgeLayout{Integration: s.cfg.Integration, Tunnel: s.cfg.Tunnel, Physical: map[string]PhysBridge{}}
	of := func(br, name string) uint32 {
		ps, err := s.c.BridgePorts(ctx, br)
		if err != nil {
			return 0
		}
		for _, p := range ps {
			if p.Name == name && p.Ofport > 0 {
				return uint32(p.Ofport)
			}
		}
		return 0
	}
	if s.cfg.Tunnel != "" {
		l.PatchTun, l.PatchInt = of(s.cfg.Integration, s.cfg.IntPeerPatch), of(s.cfg.Tunnel, s.cfg.TunPeerPatch)
	}
	for physnet, br := range s.cfg.BridgeMappings {
		in, ph, err := ovsdb.PhysPatchNames(br)
		if err != nil {
			continue
		}
		l.Physical[physnet] = PhysBridge{Bridge: br, IntOFPort: of(s.cfg.Integration, in), PhyOFPort: of(br, ph)}
	}
	return l, vif, nil
}
