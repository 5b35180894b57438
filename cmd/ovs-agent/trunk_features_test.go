package main

import (
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/trunk"
)

// [ovs] trunk_enabled: True (the default) registers the trunk handler, so a host with a
// trunk bridge is taken over (the handler rewires it); False leaves it out, as the
// reference does, and a trunk bridge is then state nobody rebuilds: refused.
func TestTrunkEnabledBuildsTheHandler(t *testing.T) {
	host := agent.HostState{Bridges: []string{"br-int", "tbr-7a4e42e6-2"}}
	for _, c := range []struct {
		ini     string
		trunk   bool
		refused bool
	}{
		{"", true, false},
		{"[ovs]\ntrunk_enabled = True\n", true, false},
		{"[ovs]\ntrunk_enabled = False\n", false, true},
	} {
		raw, err := config.ParseBytes([]byte(c.ini))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := buildFeatures(featureDeps{Config: cfg, DryRun: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		has := false
		for _, f := range fs {
			if f.Name() == trunk.FeatureName {
				has = true
			}
		}
		if has != c.trunk {
			t.Errorf("%q: trunk feature registered = %v", c.ini, has)
		}
		lines := agent.UnrebuiltState(host, fs...)
		refused := len(lines) > 0 && strings.Contains(strings.Join(lines, "\n"), "tbr-7a4e42e6-2")
		if refused != c.refused {
			t.Errorf("%q: trunk bridge refused = %v (%v)", c.ini, refused, lines)
		}
	}
}
