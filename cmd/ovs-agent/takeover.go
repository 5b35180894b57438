package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/oslo"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/secgroup"
)

// takeoverMain is `ovs-agent takeover --dry-run --config-file ...`: what the
// agent would keep, replace and remove if it started now on this host's
// dataplane (built by the reference agent or an earlier ovs-agent). It
// reads OVSDB, every bridge's flows and the server's view of the ports;
// it writes nothing.
func takeoverMain(args []string, stdout, stderr io.Writer) int {
	dry := false
	var rest []string
	for _, a := range args {
		if a == "--dry-run" || a == "-dry-run" {
			dry = true
			continue
		}
		rest = append(rest, a)
	}
	o, err := parseFlags("ovs-agent takeover", rest, stderr)
	if err == nil && (!dry || len(o.args) > 0) {
		err = fmt.Errorf("usage: ovs-agent takeover --dry-run [--config-file FILE]... (the takeover itself is what the agent does at start)")
		fmt.Fprintln(stderr, err)
	}
	if err != nil {
		return 2
	}
	cfg, err := config.Load(o.sources, o.loadOptions())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	log, closeLog, err := newLogger(cfg, stderr, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "ovs-agent:", err)
		return 1
	}
	defer closeLog()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := takeoverDryRun(ctx, cfg, log, stdout); err != nil {
		fmt.Fprintln(stderr, "ovs-agent takeover:", err)
		return 1
	}
	return 0
}

func takeoverDryRun(ctx context.Context, cfg *config.Config, log *slog.Logger, w io.Writer) error {
	in, srv, err := takeoverInputs(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer srv.close()
	oc, err := ovsdb.Dial(ctx, cfg.OVS.OVSDBConnection, ovsdb.Options{Timeout: cfg.OVS.OVSDBTimeout, Logger: log})
	if err != nil {
		return fmt.Errorf("ovsdb_connection %s: %w", cfg.OVS.OVSDBConnection, err)
	}
	defer oc.Close()
	features, err := buildFeatures(featureDeps{Config: cfg, OVSDB: oc, Log: log, DryRun: true, Client: srv.client, Cache: srv.cache,
		SecurityGroups: secgroup.Static{Groups: in.Groups, Members: in.Members}}, cfg.Agent.Extensions)
	if err != nil {
		return err
	}
	if err := checkUnrebuilt(ctx, oc, in.Layout, in.Installed, features); err != nil {
		return err
	}
	in.Features = features
	return agent.PlanTakeover(agentOptions(cfg), *in).Write(w)
}

// dryRunServer is the server connection of the dry run, kept open for the
// features' read-only calls while the plan is made (DVR's MACs and
// subnets); zero when nothing needs the server.
type dryRunServer struct {
	client *neutron.Client
	cache  *neutron.Cache
	tr     interface{ Close() error }
}

func (s *dryRunServer) close() {
	if s != nil && s.tr != nil {
		closeWithin(s.tr.Close, 2*time.Second)
	}
}

// takeoverInputs reads, without changing anything, the layout, VIFs,
// tunnel ports, controllers and flows of the configured bridges, then the
// ports' details and security groups from the server.
func takeoverInputs(ctx context.Context, cfg *config.Config, log *slog.Logger) (in *agent.TakeoverInputs, srv *dryRunServer, err error) {
	srv = &dryRunServer{}
	defer func() {
		if err != nil {
			srv.close()
			srv = nil
		}
	}()
	in, err = readTakeoverInputs(ctx, cfg, log, srv)
	return in, srv, err
}

func readTakeoverInputs(ctx context.Context, cfg *config.Config, log *slog.Logger, server *dryRunServer) (*agent.TakeoverInputs, error) {
	oc, err := ovsdb.Dial(ctx, cfg.OVS.OVSDBConnection, ovsdb.Options{Timeout: cfg.OVS.OVSDBTimeout, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("ovsdb_connection %s: %w", cfg.OVS.OVSDBConnection, err)
	}
	defer oc.Close()
	sc := switchConfig(cfg)
	in := &agent.TakeoverInputs{Installed: map[string][]openflow.Flow{}, Controllers: map[string][]string{}}
	l := agent.BridgeLayout{Integration: sc.Integration, Tunnel: sc.Tunnel, Physical: map[string]agent.PhysBridge{}}
	ports := map[string]map[string]ovsdb.PortInfo{}
	read := func(br string) (map[string]ovsdb.PortInfo, error) {
		if m, ok := ports[br]; ok {
			return m, nil
		}
		ps, err := oc.BridgePorts(ctx, br)
		if err != nil {
			return nil, fmt.Errorf("bridge %s (the agent would create it; nothing to take over): %w", br, err)
		}
		m := map[string]ovsdb.PortInfo{}
		for _, p := range ps {
			m[p.Name] = p
		}
		ports[br] = m
		return m, nil
	}
	ofport := func(br, name string) (uint32, error) {
		m, err := read(br)
		if err != nil {
			return 0, err
		}
		if p, ok := m[name]; ok && p.Ofport > 0 {
			return uint32(p.Ofport), nil
		}
		return 0, fmt.Errorf("%s has no port %s with an ofport (the agent would create it)", br, name)
	}
	if l.Tunnel != "" {
		if l.PatchTun, err = ofport(l.Integration, sc.IntPeerPatch); err != nil {
			return nil, err
		}
		if l.PatchInt, err = ofport(l.Tunnel, sc.TunPeerPatch); err != nil {
			return nil, err
		}
	}
	for physnet, br := range sc.BridgeMappings {
		i, p, err := ovsdb.PhysPatchNames(br)
		if err != nil {
			return nil, err
		}
		pb := agent.PhysBridge{Bridge: br}
		if pb.IntOFPort, err = ofport(l.Integration, i); err != nil {
			return nil, err
		}
		if pb.PhyOFPort, err = ofport(br, p); err != nil {
			return nil, err
		}
		l.Physical[physnet] = pb
	}
	in.Layout = l
	vms, err := oc.VMPorts(ctx, l.Integration)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, p := range vms {
		in.VIFs = append(in.VIFs, agent.VIF{PortID: p.IfaceID, Name: p.Name, MAC: p.AttachedMAC, OFPort: int32(p.Ofport),
			Tag: p.Tag, OtherConfig: maps.Clone(p.OtherConfig), UUID: p.IfaceUUID})
		ids = append(ids, p.IfaceID)
	}
	if l.Tunnel != "" {
		m, err := read(l.Tunnel)
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			typ := p.Type
			if typ == "ip6gre" {
				typ = "gre"
			}
			if typ == "vxlan" || typ == "gre" || typ == "geneve" {
				in.Tunnels = append(in.Tunnels, agent.TunnelPort{Name: p.Name, Type: typ, RemoteIP: p.Options["remote_ip"], LocalIP: p.Options["local_ip"], OFPort: int32(p.Ofport)})
			}
		}
		sort.Slice(in.Tunnels, func(i, j int) bool { return in.Tunnels[i].Name < in.Tunnels[j].Name })
	}
	for _, br := range l.Bridges() {
		if bi, err := oc.Bridge(ctx, br); err == nil {
			in.Controllers[br] = bi.Controllers
		}
		conn, err := openflow.Dial(ctx, oc.MgmtSocket(br), openflow.Options{Logger: log, RequestTimeout: cfg.OVS.OFRequestTimeout})
		if err != nil {
			return nil, fmt.Errorf("openflow %s: %w", br, err)
		}
		fs, err := conn.DumpFlows(ctx, openflow.TableAll, 0, 0)
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("openflow %s: dump flows: %w", br, err)
		}
		in.Installed[br] = fs
	}
	in.Managers = managers(ctx, cfg.OVS.OVSDBConnection)

	// DVR's flows depend on the server (MACs, subnets) even without ports
	if len(ids) == 0 && !cfg.Agent.EnableDistributedRouting {
		return in, nil
	}
	tr, err := dialBroker(ctx, cfg, oslo.Config{Host: cfg.Default.Host,
		ControlExchange: cfg.Default.ControlExchange, ResponseTimeout: 30 * time.Second, Logger: log, DisableBackoff: true})
	if err != nil {
		return nil, err
	}
	client := neutron.NewClient(neutron.Oslo{T: tr}, cfg.Default.Host)
	cache := neutron.NewCache(neutron.CacheOptions{Puller: client})
	server.client, server.cache, server.tr = client, cache, tr
	if len(ids) == 0 {
		return in, nil
	}
	srv := &agent.NeutronServer{Client: client, Cache: cache, Host: cfg.Default.Host}
	devs, failed, err := srv.Devices(ctx, ids, true)
	if err == nil && len(failed) > 0 {
		err = failed[slices.Sorted(maps.Keys(failed))[0]] // the first, as an example
	}
	if err != nil {
		return nil, fmt.Errorf("device details from the server (%d ports failed): %w", len(failed), err)
	}
	in.Devices = devs
	sgs := map[string]bool{}
	for _, d := range devs {
		for _, g := range d.SecurityGroups {
			sgs[g] = true
		}
	}
	opt := agentOptions(cfg)
	if opt.Pipeline.OVSFirewall() && len(sgs) > 0 {
		list := make([]string, 0, len(sgs))
		for g := range sgs {
			list = append(list, g)
		}
		sort.Strings(list)
		var groups map[string]firewall.SecurityGroup
		var members map[string][]firewall.Member
		if groups, members, err = srv.SecurityGroups(ctx, list); err != nil {
			return nil, fmt.Errorf("security groups from the server: %w", err)
		}
		in.Groups, in.Members = groups, members
	}
	return in, nil
}

// managers lists the Open_vSwitch table's manager targets (informational;
// the ovsdb package does not model the Manager table).
func managers(ctx context.Context, conn string) []string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-vsctl", "--db="+conn, "get-manager").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}
