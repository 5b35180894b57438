package metrics

import (
	"fmt"
	"strings"
	"sync"
)

// Families of the agent's features (internal/feature): a feature
// registers its own counters and gauges when it is built; they are served
// with the agent's. At most two labels each, as the agent's own.

// Counter is a counter family of a feature, by up to two label values.
type Counter struct{ v *vec[counter] }

// Gauge is a gauge family of a feature, by up to two label values.
type Gauge struct{ v *vec[gauge] }

type extraFamilies struct {
	mu    sync.Mutex
	fams  []family
	names map[string]bool
}

// NewCounter registers a counter family; name must start with
// "ovsagent_" and be new. On a nil *Metrics it returns a Counter that
// records nothing.
func (m *Metrics) NewCounter(name, help string, labels ...string) (*Counter, error) {
	if m == nil {
		return nil, nil
	}
	v := newVec(func() *counter { return new(counter) }, labels...)
	if err := m.addFamily(name, labels, counterFamily(name, help, v)); err != nil {
		return nil, err
	}
	return &Counter{v}, nil
}

// NewGauge registers a gauge family (see NewCounter).
func (m *Metrics) NewGauge(name, help string, labels ...string) (*Gauge, error) {
	if m == nil {
		return nil, nil
	}
	v := newVec(func() *gauge { return new(gauge) }, labels...)
	if err := m.addFamily(name, labels, gaugeFamily(name, help, v)); err != nil {
		return nil, err
	}
	return &Gauge{v}, nil
}

func (m *Metrics) addFamily(name string, labels []string, f family) error {
	if !strings.HasPrefix(name, "ovsagent_") || len(labels) > 2 {
		return fmt.Errorf("metrics: family %q: want an ovsagent_ name and at most two labels", name)
	}
	m.extra.mu.Lock()
	defer m.extra.mu.Unlock()
	for _, own := range m.fams {
		if own.name == name {
			return fmt.Errorf("metrics: family %q exists", name)
		}
	}
	if m.extra.names == nil {
		m.extra.names = map[string]bool{}
	}
	if m.extra.names[name] {
		return fmt.Errorf("metrics: family %q exists", name)
	}
	m.extra.names[name] = true
	m.extra.fams = append(m.extra.fams, f)
	return nil
}

func (m *Metrics) extraFams() []family {
	m.extra.mu.Lock()
	defer m.extra.mu.Unlock()
	return append([]family(nil), m.extra.fams...)
}

// values takes the label values in the family's label order ("" for
// missing ones).
func values(lv []string) (a, b string) {
	if len(lv) > 0 {
		a = lv[0]
	}
	if len(lv) > 1 {
		b = lv[1]
	}
	return a, b
}

// Inc adds one to the child of the label values.
func (c *Counter) Inc(labelValues ...string) {
	if c != nil {
		c.v.with(values(labelValues)).inc()
	}
}

// Set sets the child of the label values.
func (g *Gauge) Set(v float64, labelValues ...string) {
	if g != nil {
		g.v.with(values(labelValues)).set(v)
	}
}
