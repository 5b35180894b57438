package metrics

import (
	"strings"
	"testing"
)

func TestFeatureFamiliesServed(t *testing.T) {
	m := New()
	c, err := m.NewCounter("ovsagent_qos_test_total", "Test counter.", "policy", "direction")
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.NewGauge("ovsagent_qos_test_ports", "Test gauge.")
	if err != nil {
		t.Fatal(err)
	}
	c.Inc("p1", "egress")
	c.Inc("p1", "egress")
	g.Set(3)
	out := string(m.AppendText(nil))
	for _, want := range []string{
		"# TYPE ovsagent_qos_test_total counter",
		`ovsagent_qos_test_total{direction="egress",policy="p1"} 2`,
		"ovsagent_qos_test_ports 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if _, err := m.NewGauge("ovsagent_qos_test_ports", "again"); err == nil {
		t.Errorf("a family registered twice")
	}
	if _, err := m.NewGauge("ovsagent_in_sync", "the agent's own"); err == nil {
		t.Errorf("a feature family shadows the agent's own")
	}
	if _, err := m.NewCounter("qos_total", "no prefix"); err == nil {
		t.Errorf("a family without the ovsagent_ prefix")
	}
	var nilM *Metrics
	nc, err := nilM.NewCounter("ovsagent_x_total", "x")
	if err != nil {
		t.Fatal(err)
	}
	nc.Inc("a") // records nothing, does not panic
}
