package main

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/dvr"
	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/qos"
	"github.com/ovsagent/ovsagent/internal/secgroup"
	"github.com/ovsagent/ovsagent/internal/trunk"
)

// The one place the agent's features are built (internal/feature): the
// pipeline is the agent's own; the OVS firewall (internal/secgroup) and
// everything else are built here from the configuration and handed to agent.Deps.Features, to
// agent.PlanTakeover (takeover --dry-run), agent.ExplainOffline (explain)
// and agent.UnrebuiltState (the start and takeover refusals).

// featureDeps are the edges a feature may need when it is built. In the
// one-shot subcommands (DryRun: takeover --dry-run, explain) only Config,
// OVSDB and Log are set and the feature must not change anything.
type featureDeps struct {
	Config *config.Config
	OVSDB  *ovsdb.Client
	// Client calls the server (plugin RPC); Server serves a feature's own
	// topics (Server.Serve(topic, endpoints...)); Cache holds the OVOs
	// (types added with neutron.RegisterType). In the dry-run subcommands
	// Server is nil, and Client and Cache are nil or (takeover --dry-run)
	// there for read-only calls.
	Client *neutron.Client
	Server neutron.Server
	Cache  *neutron.Cache
	// SecurityGroups answers the firewall's security groups: the agent's
	// NeutronServer, or in the dry-run subcommands the groups read
	// beforehand (secgroup.Static).
	SecurityGroups secgroup.Groups
	// OpenFlow is one connection and reconciler per bridge (connected
	// after the features are built, before the agent runs; nil when DryRun).
	OpenFlow *agent.OFBridges
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	DryRun   bool
}

type featureBuilder func(featureDeps) (feature.Feature, error)

// alwaysFeatures run whatever [agent] extensions says (the OVS firewall when
// it is the firewall_driver; the reference always runs its trunk handler,
// when [ovs] trunk_enabled), in this order. A builder may return no feature
// (nil) when its own option turns it off.
var alwaysFeatures = []featureBuilder{buildFirewall, buildTrunk, buildDVR}

// buildFirewall is the OVS firewall (internal/secgroup) when
// [securitygroup] enable_security_group and firewall_driver = openvswitch:
// the fw: owners of br-int and the conntrack cleanup of the zones a change
// touched (not in the dry-run subcommands).
func buildFirewall(d featureDeps) (feature.Feature, error) {
	if d.Config == nil {
		return nil, nil
	}
	if opt := agentOptions(d.Config); !opt.Pipeline.OVSFirewall() {
		return nil, nil
	}
	deps := secgroup.Deps{
		Config: firewall.Config{PermittedEthertypes: d.Config.SecurityGroup.PermittedEthertypes,
			ExplicitlyEgressDirect: d.Config.Agent.ExplicitlyEgressDirect},
		Groups:  d.SecurityGroups,
		Metrics: d.Metrics,
	}
	if !d.DryRun && d.OVSDB != nil {
		deps.Conntrack = conntrackFor(d.Config, d.OVSDB.RunDir())
	}
	return secgroup.New(deps), nil
}

// buildDVR is the reference's OVSDVRNeutronAgent: with [agent]
// enable_distributed_routing (docs/dvr.md), the DVR feature and its dvr_mac_address_update consumer. In the
// dry-run subcommands it only reads (takeover --dry-run: this host's MAC from
// the list, the subnets; explain: nothing).
func buildDVR(d featureDeps) (feature.Feature, error) {
	if d.Config == nil || !d.Config.Agent.EnableDistributedRouting {
		return nil, nil
	}
	if d.Client == nil || d.Cache == nil {
		return dvr.NewFeature(dvr.Deps{}), nil
	}
	if d.DryRun {
		return dvr.NewFeature(dvr.Deps{RPC: dvr.ReadOnly{RPC: d.Client, Host: d.Config.Default.Host}, Port: d.Cache.Port}), nil
	}
	f := dvr.NewFeature(dvr.Deps{RPC: d.Client, Port: d.Cache.Port})
	if d.Server != nil {
		if err := d.Server.Serve(dvr.UpdateTopic, f.Endpoints()...); err != nil {
			return nil, fmt.Errorf("consume %s: %w", dvr.UpdateTopic, err)
		}
	}
	return f, nil
}

// buildTrunk is the reference's ovs_capabilities: the trunk handler when
// [ovs] trunk_enabled (default True). In the dry-run subcommands the feature
// is there (trunk bridges are state it rebuilds, not a refusal) but runs
// nothing. Without trunk_enabled a trunk bridge is refused at the start as
// the state of a feature that is absent.
func buildTrunk(d featureDeps) (feature.Feature, error) {
	if d.Config != nil && !d.Config.OVS.TrunkEnabled {
		return nil, nil
	}
	f := &trunk.Feature{}
	if d.DryRun || d.Client == nil || d.OVSDB == nil {
		return f, nil
	}
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	h := &trunk.Handler{IntBridge: d.Config.OVS.IntegrationBridge, RPC: d.Client.Trunk(), OVS: d.OVSDB,
		Log: log.With("feature", trunk.FeatureName)}
	if c, err := d.Metrics.NewCounter("ovsagent_trunk_status_reports_total",
		"Trunk statuses reported to neutron-server (update_trunk_status), by status and result.", "status", "result"); err != nil {
		return nil, err
	} else if c != nil {
		h.OnStatus = func(_, status string, err error) {
			res := "ok"
			if err != nil {
				res = "error"
			}
			c.Inc(status, res)
		}
	}
	if d.Server != nil {
		subs := neutron.TrunkSubscriptions(h, nil)
		for _, s := range subs {
			if err := d.Server.Serve(s.Topic, s.Endpoints...); err != nil {
				return nil, fmt.Errorf("consume %s: %w", s.Topic, err)
			}
		}
	}
	f.Handler, f.Watch = h, d.OVSDB.WatchBridgePrefix
	return f, nil
}

// extensionFeatures are the [agent] extensions ovs-agent implements, by
// name. An extension stays Refused in the option table
// (internal/config/options.go) until its builder is here.
var extensionFeatures = map[string]featureBuilder{"qos": buildQoS}

// extensionTypes register the OVO types an extension consumes (cache maps and
// push topics): run calls registerExtensionTypes before it builds the cache, so an
// agent without the extension neither caches nor subscribes to them.
var extensionTypes = map[string]func(){"qos": qos.Register}

func registerExtensionTypes(extensions []string) {
	for _, name := range extensions {
		if r := extensionTypes[name]; r != nil {
			r()
		}
	}
}

// buildFeatures builds the always-on features, then the extensions named
// (in their configured order). A name without a builder is an error: the
// option table refuses it at load, this is the second lock.
func buildFeatures(d featureDeps, extensions []string) ([]feature.Feature, error) {
	var out []feature.Feature
	add := func(b featureBuilder, what string) error {
		f, err := b(d)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if f != nil {
			out = append(out, f)
		}
		return nil
	}
	for i, b := range alwaysFeatures {
		if err := add(b, fmt.Sprintf("feature %d", i)); err != nil {
			return nil, err
		}
	}
	for _, name := range extensions {
		b, ok := extensionFeatures[name]
		if !ok {
			return nil, fmt.Errorf("extension %q: not supported by ovs-agent yet", name)
		}
		if err := add(b, "extension "+name); err != nil {
			return nil, err
		}
	}
	// One owner kind, one feature: refused here rather than at Run.
	if _, err := feature.NewSet(out...); err != nil {
		return nil, err
	}
	return out, nil
}

// featureConfigurations adds the features' part of report_state: their
// names in `extensions` and their keys in the configurations.
func featureConfigurations(c *neutron.AgentConfigurations, fs []feature.Feature) {
	for _, f := range fs {
		r, ok := f.(feature.Reporter)
		if !ok {
			continue
		}
		if n := r.Extension(); n != "" {
			c.Extensions = append(c.Extensions, n)
		}
		if c.Extra == nil {
			c.Extra = map[string]any{}
		}
		r.Configurations(c.Extra)
		// in_distributed_mode is a typed key of the configurations (always
		// sent, false without DVR); the dvr feature decides its value
		if v, ok := c.Extra["in_distributed_mode"].(bool); ok {
			c.InDistributedMode = v
			delete(c.Extra, "in_distributed_mode")
		}
	}
	sort.Strings(c.Extensions)
}
