package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/oslo"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/pipeline"
	"github.com/ovsagent/ovsagent/internal/secgroup"
)

// run wires every package and runs the agent until ctx is cancelled
// (SIGTERM/SIGINT). The dataplane is left as it is on return.
func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	m := metrics.New()
	go watchdog(ctx, log)
	ready := &readyOnce{log: log}
	var a atomic.Pointer[agent.Agent]
	var cacheRef atomic.Pointer[neutron.Cache]

	// OVSDB first: a missing mapped bridge stops the agent before anything
	// in OVS is changed.
	oc, err := ovsdb.Dial(ctx, cfg.OVS.OVSDBConnection, ovsdb.Options{Timeout: cfg.OVS.OVSDBTimeout, Logger: log})
	if err != nil {
		return fmt.Errorf("ovsdb_connection %s: %w", cfg.OVS.OVSDBConnection, err)
	}
	defer oc.Close()
	swCfg := switchConfig(cfg)
	sw := agent.NewOVSDBSwitch(ctx, oc, swCfg, log)
	if err := sw.CheckPhysicalBridges(ctx); err != nil {
		return err
	}

	// RabbitMQ: the transport retries in the background; every call waits.
	tr, err := dialBroker(ctx, cfg, oslo.Config{
		Host: cfg.Default.Host, ControlExchange: cfg.Default.ControlExchange,
		HeartbeatTimeout: cfg.Rabbit.HeartbeatTimeoutThreshold,
		RetryInterval:    cfg.Rabbit.RetryInterval, RetryBackoff: cfg.Rabbit.RetryBackoff, RetryMax: cfg.Rabbit.IntervalMax,
		TransientQueuesTTL: cfg.Rabbit.TransientQueuesTTL, ResponseTimeout: cfg.Default.RPCResponseTimeout,
		ResponseMaxTimeout: cfg.Default.RPCResponseMaxTimeout, Logger: log, PrefetchCount: cfg.Rabbit.QOSPrefetchCount,
		Observer: observer{m: m, onReconnect: func() {
			// pushes sent while disconnected are lost: the resync pulls again
			if c := cacheRef.Load(); c != nil {
				c.Unsatisfy()
			}
			if ag := a.Load(); ag != nil {
				ag.Notify(agent.Resync{Reason: agent.ResyncBrokerReconnect})
			}
		}},
	})
	if err != nil {
		return err
	}
	defer closeWithin(tr.Close, 2*time.Second)
	// SIGTERM: calls still out may end within quitting_rpc_timeout, and no
	// call waits longer than that (neutron-lib's set_max_timeout).
	go func() {
		<-ctx.Done()
		tr.CapTimeouts(cfg.Agent.QuittingRPCTimeout)
	}()
	rpc := neutron.Oslo{T: tr}
	client := neutron.NewClient(rpc, cfg.Default.Host)
	client.DeviceListStep = cfg.DeviceListChunk()
	// OVO versions per server: pulls ask for the newest, report_state and the push
	// topics follow what the server was seen producing (neutron/versions.go).
	versions := neutron.NewNegotiator(log)
	client.Versions = versions
	versions.SetProber(client.ProbeVersions)
	var srv *agent.NeutronServer
	registerExtensionTypes(cfg.Agent.Extensions)
	cache := neutron.NewCache(neutron.CacheOptions{OnEvent: func(ev neutron.Event) {
		if ag := a.Load(); ag != nil {
			agent.NotifyFromCache(ag, cfg.Default.Host, ev)
			srv.WarmFromEvent(ctx, ev)
		}
	}})
	cache.SetPuller(client)
	cacheRef.Store(cache)
	srv = &agent.NeutronServer{Client: client, Cache: cache, Host: cfg.Default.Host}

	// Bridges, then one OpenFlow connection per bridge.
	layout, err := setupBridgesRetrying(ctx, sw, log)
	if err != nil {
		return err
	}
	of := agent.NewOFBridges(log)
	of.RequestTimeout, of.InactivityProbe = cfg.OVS.OFRequestTimeout, cfg.OVS.OFInactivityProbe
	of.ConnectTimeout = cfg.OVS.OFConnectTimeout
	defer of.Close()

	reporter := &neutron.Reporter{Client: client, Interval: cfg.Agent.ReportInterval, ResourceVersions: versions.Reported}
	opt := agentOptions(cfg)
	features, err := buildFeatures(featureDeps{Config: cfg, OVSDB: oc, Client: client, Server: rpc, Cache: cache, SecurityGroups: srv,
		OpenFlow: of, Metrics: m, Log: log}, cfg.Agent.Extensions)
	if err != nil {
		return err
	}
	ag := agent.New(opt, agent.Deps{
		Switch: sw, Flows: of, Plugin: srv, Cache: srv, Metrics: m, Log: log,
		OnOVSRestart: reporter.ForceStartFlag,
		Features:     features,
	})
	a.Store(ag)
	oc.OnReconnect(func() { ag.Notify(agent.Resync{Reason: agent.ResyncOVSDBReconnect}) })

	if err := (neutron.ConsumerConfig{Host: cfg.Default.Host, Cache: cache, Handler: agent.NeutronHandler{A: ag},
		// A push that does not decode is dropped by oslo (bad_args): one log line,
		// counted in ovsagent_malformed_messages_total; no hook here, or it counts twice.
		L2Population: cfg.Agent.L2Population, Versions: versions, OnVersions: reporter.Kick}).Serve(rpc); err != nil {
		return fmt.Errorf("consumers: %w", err)
	}
	// The server loads the ports already plugged while the OpenFlow
	// connections read back the earlier run's flows (see Prefetch).
	if vms, err := oc.VMPorts(ctx, layout.Integration); err == nil {
		ids := make([]string, 0, len(vms))
		for _, vm := range vms {
			ids = append(ids, vm.IfaceID)
		}
		srv.Prefetch(ctx, ids)
	}
	for _, br := range layout.Bridges() {
		if err := of.Add(ctx, br, oc.MgmtSocket(br)); err != nil {
			return err
		}
	}
	seen := map[string][]openflow.Flow{}
	for _, br := range layout.Bridges() {
		seen[br] = of.InstalledIn(br, unrebuiltTables)
	}
	if err := checkUnrebuilt(ctx, oc, layout, seen, features); err != nil {
		return err
	}
	watchConnections(m, tr, oc, of, layout.Bridges())
	// Features with work of their own (the trunk handler) start once the host
	// passed the checks above and the consumers are served.
	for _, f := range features {
		if r, ok := f.(feature.Runner); ok {
			go r.Run(ctx)
		}
	}

	if cfg.Agent.ReportInterval > 0 {
		sys, _ := oc.System(ctx)
		hv := hypervisorHostname(ctx)
		reporter.Configurations = func() (neutron.AgentConfigurations, bool) {
			c := agentConfigurations(cfg, sys, hv, ag.Devices())
			featureConfigurations(&c, features)
			return c, oc.Connected()
		}
		reporter.Synced = ag.InSync
		reporter.OnReport = func(res string, err error) {
			if err == nil {
				ready.ready("reporting to neutron-server")
			}
			if err == nil && res == neutron.ReportRevived {
				ag.Notify(agent.Resync{Reason: agent.ResyncRevived})
			}
		}
		go func() {
			// the first report waits for the features' parts that need the
			// server (dvr: this host's DVR MAC, as the reference's first
			// report), at most one report_interval
			ok, cut := feature.WaitReportGates(ctx, features, cfg.Agent.ReportInterval)
			if !ok {
				return
			}
			if cut {
				log.Warn("first report_state sent before every feature's part is known", "waited", cfg.Agent.ReportInterval)
			}
			reporter.Run(ctx)
		}()
	} else {
		ready.ready("running (report_interval = 0: no state reports)")
	}

	if cfg.OVSAgent.MetricsListen != "" {
		ms, err := listenMetrics(cfg, m, explainHandler(ag))
		if err != nil {
			return err
		}
		ms.Live(ag.Alive)
		ms.Ready(ag.LoopCheck)
		ms.Ready(of.Check)
		ms.Ready(metrics.Up("ovsdb", oc.Connected))
		ms.Ready(metrics.Up("amqp", tr.Connected))
		ms.Ready(tr.DeclareCheck)
		go func() {
			if err := ms.Serve(ctx, log); err != nil {
				log.Error("metrics server", "err", err)
			}
		}()
		log.Info("metrics listening", "addr", ms.Addr())
	}
	return ag.Run(ctx)
}

func setupBridgesRetrying(ctx context.Context, sw *agent.OVSDBSwitch, log *slog.Logger) (agent.BridgeLayout, error) {
	backoff := 200 * time.Millisecond
	for {
		l, err := sw.SetupBridges(ctx)
		if err == nil {
			return l, nil
		}
		log.Warn("bridge setup failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return l, ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 10*time.Second {
			backoff *= 2
		}
	}
}

func closeWithin(f func() error, d time.Duration) {
	done := make(chan struct{})
	go func() { _ = f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

func switchConfig(cfg *config.Config) agent.SwitchConfig {
	sc := agent.SwitchConfig{
		Integration: cfg.OVS.IntegrationBridge, IntPeerPatch: cfg.OVS.IntPeerPatchPort, TunPeerPatch: cfg.OVS.TunPeerPatchPort,
		DatapathType: cfg.OVS.DatapathType, MACTableSize: cfg.OVS.BridgeMACTableSize, IGMP: ovsdb.IGMP{
			Snooping: cfg.OVS.IGMPSnoopingEnable, Flood: cfg.OVS.IGMPFlood,
			FloodReports: cfg.OVS.IGMPFloodReports, FloodUnregistered: cfg.OVS.IGMPFloodUnregistered},
		BridgeMappings: map[string]string{}, VXLANUDPPort: cfg.Agent.VXLANUDPPort,
		DontFragment: cfg.Agent.DontFragment, TunnelCsum: cfg.Agent.TunnelCsum,
	}
	if cfg.TunnelingEnabled() {
		sc.Tunnel = cfg.OVS.TunnelBridge
	}
	for _, bm := range cfg.OVS.BridgeMappings {
		sc.BridgeMappings[bm.Physnet] = bm.Bridge
	}
	switch {
	case cfg.Agent.DSCPInherit:
		sc.TOS = "inherit"
	case cfg.Agent.DSCPSet && cfg.Agent.DSCP > 0:
		sc.TOS = strconv.Itoa(cfg.Agent.DSCP << 2)
	}
	return sc
}

func agentOptions(cfg *config.Config) agent.Options {
	pc := pipeline.Config{
		FirewallDriver: cfg.SecurityGroup.FirewallDriver, EnableSecurityGroup: cfg.SecurityGroup.EnableSecurityGroup,
		L2Population: cfg.Agent.L2Population, ARPResponder: cfg.Agent.ARPResponder,
		ExplicitlyEgressDirect: cfg.Agent.ExplicitlyEgressDirect,
		Distributed:            cfg.Agent.EnableDistributedRouting,
	}
	for _, t := range cfg.Agent.TunnelTypes {
		pc.TunnelTypes = append(pc.TunnelTypes, pipeline.NetworkType(t))
	}
	opt := agent.Options{
		Host: cfg.Default.Host, TunnelTypes: cfg.Agent.TunnelTypes, L2Population: cfg.Agent.L2Population,
		Pipeline: pc, BatchWindow: cfg.OVSAgent.BatchWindow,
		ReportInterval: 0, // neutron.Reporter sends the reports
		// The reference checks the canary in every rpc_loop iteration
		// (polling_interval). ovs-vswitchd can wipe a bridge's flows without
		// dropping our OpenFlow connection (ovs-ctl restart: flow-restore-wait
		// cleared, then the Controller row applied → ofproto_flush_flows), so
		// only this check notices; report_interval (30 s) meant 30 s outages.
		CanaryInterval: cfg.Agent.PollingInterval,
		// After a burst (wiring, a resync), once in sync and idle for 5 s,
		// return the burst's garbage to the OS (see agent.idleRelease).
		ReleaseMemoryIdle: 5 * time.Second,
		QuitGrace:         cfg.Agent.QuittingRPCTimeout,
		DropFlowsOnStart:  cfg.Agent.DropFlowsOnStart,
	}
	if cfg.TunnelingEnabled() {
		opt.LocalIP = cfg.OVS.LocalIP
	}
	return opt
}

func agentConfigurations(cfg *config.Config, sys ovsdb.SystemInfo, hypervisor string, devices int) neutron.AgentConfigurations {
	bm := map[string]string{}
	for _, m := range cfg.OVS.BridgeMappings {
		bm[m.Physnet] = m.Bridge
	}
	c := neutron.AgentConfigurations{
		BridgeMappings:    bm,
		IntegrationBridge: cfg.OVS.IntegrationBridge,
		TunnelTypes:       cfg.Agent.TunnelTypes,
		L2Population:      cfg.Agent.L2Population,
		// forced on with DVR and tunnels, as pipeline.Config.ARPResponderEnabled
		ARPResponderEnabled: cfg.Agent.ARPResponder && cfg.Agent.L2Population ||
			cfg.Agent.EnableDistributedRouting && len(cfg.Agent.TunnelTypes) > 0,
		// in_distributed_mode is the dvr feature's (featureConfigurations)
		EnableDistributedRouting: cfg.Agent.EnableDistributedRouting,
		LogAgentHeartbeats:       cfg.Agent.LogAgentHeartbeats,
		// filled by featureConfigurations from the features built, so only a
		// running extension (qos) is named; the refused ones never load
		Extensions:         nil,
		DatapathType:       cfg.OVS.DatapathType,
		OVSCapabilities:    neutron.OVSCapabilities{DatapathTypes: sys.DatapathTypes, IfaceTypes: sys.IfaceTypes},
		VhostuserSocketDir: cfg.OVS.VhostuserSocketDir,
		OVSHybridPlug:      cfg.EffectiveFirewall() == config.FirewallIptablesHybrid,
		Devices:            devices,
	}
	if cfg.TunnelingEnabled() {
		c.TunnelingIP = cfg.OVS.LocalIP
	}
	placementConfigurations(cfg, hypervisor, &c)
	return c
}

// observer feeds the transport's counters into the metrics.
type observer struct {
	m           *metrics.Metrics
	onReconnect func()
}

func (o observer) CallDone(method string, d time.Duration, err error) { o.m.ObserveRPC(method, d, err) }
func (o observer) Dropped(topic, reason string)                       { o.m.IncMalformed(topic, reason) }
func (o observer) Reconnected()                                       { o.onReconnect() }
func (o observer) DeclareFailed(queue, reason string)                 { o.m.IncDeclareFailure(queue, reason) }

// explainHandler serves GET /explain/<port-id> from the running agent
// (mounted only with explain_endpoint).
func explainHandler(ag *agent.Agent) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/explain/")
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		e, err := ag.Explain(ctx, id)
		if err != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(err, agent.ErrUnknownPort) {
				code = http.StatusNotFound
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = e.Write(w)
	})
}

// explain prints what the agent owns for one port: from the running
// agent's /explain endpoint when it serves one (explain_endpoint), else
// computed from OVSDB and the server without changing anything. main's
// `explain PORT-ID` calls it.
func explain(ctx context.Context, cfg *config.Config, log *slog.Logger, portID string, w io.Writer) error {
	if addr := cfg.OVSAgent.MetricsListen; addr != "" && cfg.OVSAgent.ExplainEndpoint {
		hc := &http.Client{Timeout: 3 * time.Second}
		if resp, err := hc.Get("http://" + addr + "/explain/" + portID); err == nil {
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				_, err := io.Copy(w, resp.Body)
				return err
			}
			if resp.StatusCode == http.StatusNotFound {
				return fmt.Errorf("explain %s: %w", portID, agent.ErrUnknownPort)
			}
		}
	}
	oc, err := ovsdb.Dial(ctx, cfg.OVS.OVSDBConnection, ovsdb.Options{Timeout: cfg.OVS.OVSDBTimeout, Logger: log})
	if err != nil {
		return fmt.Errorf("ovsdb_connection %s: %w", cfg.OVS.OVSDBConnection, err)
	}
	defer oc.Close()
	sw := agent.NewOVSDBSwitch(ctx, oc, switchConfig(cfg), log)
	l, vif, err := sw.ExplainInputs(ctx, portID)
	if err != nil {
		return err
	}
	tr, err := dialBroker(ctx, cfg, oslo.Config{Host: cfg.Default.Host,
		ControlExchange: cfg.Default.ControlExchange, ResponseTimeout: 10 * time.Second, Logger: log, DisableBackoff: true})
	if err != nil {
		return err
	}
	defer closeWithin(tr.Close, 2*time.Second)
	client := neutron.NewClient(neutron.Oslo{T: tr}, cfg.Default.Host)
	cache := neutron.NewCache(neutron.CacheOptions{Puller: client})
	srv := &agent.NeutronServer{Client: client, Cache: cache, Host: cfg.Default.Host}
	devs, failed, err := srv.Devices(ctx, []string{portID}, true)
	if err == nil {
		err = failed[portID]
	}
	if err != nil {
		return fmt.Errorf("explain %s: device details from the server: %w", portID, err)
	}
	dev := devs[portID]
	opt := agentOptions(cfg)
	var groups map[string]firewall.SecurityGroup
	var members map[string][]firewall.Member
	if opt.Pipeline.OVSFirewall() && len(dev.SecurityGroups) > 0 {
		if groups, members, err = srv.SecurityGroups(ctx, dev.SecurityGroups); err != nil {
			return err
		}
	}
	features, err := buildFeatures(featureDeps{Config: cfg, OVSDB: oc, Log: log, DryRun: true,
		SecurityGroups: secgroup.Static{Groups: groups, Members: members}}, cfg.Agent.Extensions)
	if err != nil {
		return err
	}
	return agent.ExplainOffline(opt, l, vif, dev, features...).Write(w)
}

// conntrackFor is the conntrack cleanup of the OVS firewall: ovs-vswitchd's
// own conntrack, through ovs-appctl at this OVS's run directory.
func conntrackFor(cfg *config.Config, runDir string) secgroup.Conntrack {
	sg := cfg.SecurityGroup
	if !sg.EnableSecurityGroup || sg.FirewallDriver != pipeline.FirewallOpenvSwitch || runDir == "" {
		return nil
	}
	return secgroup.AppctlConntrack{RunDir: runDir}
}
