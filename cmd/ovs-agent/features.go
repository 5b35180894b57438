package main

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// The one place the agent's features are built (internal/feature): the
// pipeline and the firewall are the agent's own; everything else is built
// here from the configuration and handed to agent.Deps.Features, to
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
	// (types added with neutron.RegisterType). All nil when DryRun.
	Client *neutron.Client
	Server neutron.Server
	Cache  *neutron.Cache
	// OpenFlow is one connection and reconciler per bridge (connected
	// after the features are built, before the agent runs; nil when DryRun).
	OpenFlow *agent.OFBridges
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	DryRun   bool
}

type featureBuilder func(featureDeps) (feature.Feature, error)

// alwaysFeatures run whatever the configuration says (the reference always
// runs its trunk handler), in this order.
var alwaysFeatures []featureBuilder

// extensionFeatures are the [agent] extensions ovs-agent implements, by
// name. An extension stays Refused in the option table
// (internal/config/options.go) until its builder is here.
var extensionFeatures = map[string]featureBuilder{}

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
		out = append(out, f)
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
	}
	sort.Strings(c.Extensions)
}
