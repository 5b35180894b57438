package metrics

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// The metric types the agent uses: counters, gauges and histograms with at
// most two labels. Observations are lock-free atomics on a child the caller
// already holds, or found in a vector's map under a read lock with a
// [2]string key (no allocation); the exposition reads them with the same
// atomics.

// counter only ever goes up by one: an integer, exposed as a float like
// every Prometheus sample value.
type counter struct{ n atomic.Uint64 }

func (c *counter) inc() { c.n.Add(1) }

// gauge holds a float64's bits.
type gauge struct{ bits atomic.Uint64 }

func (g *gauge) set(v float64) { g.bits.Store(math.Float64bits(v)) }
func (g *gauge) get() float64  { return math.Float64frombits(g.bits.Load()) }

// probe is a state read when scraped: 1 when up() says so, else 0.
type probe struct{ up atomic.Pointer[func() bool] }

func (p *probe) set(up func() bool) { p.up.Store(&up) }

func (p *probe) get() float64 {
	if f := p.up.Load(); f != nil && (*f)() {
		return 1
	}
	return 0
}

// histogram counts observations per bucket (not cumulated: one atomic add
// per observation); the last slot is the +Inf bucket. The exposition
// cumulates them and takes the total as _count, so that _count always
// equals the +Inf bucket even while observations land during a scrape.
type histogram struct {
	upper  []float64 // shared, sorted, without +Inf
	counts []atomic.Uint64
	sum    atomic.Uint64 // float64 bits
}

func newHistogram(upper []float64) *histogram {
	return &histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

// observe adds v to the first bucket whose upper bound is ≥ v (Prometheus'
// "le"), and to the sum.
func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.upper) && v > h.upper[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// labels are a family's label names in exposition order (sorted by name, as
// the text format's writers emit them) and whether the callers' order is
// the reverse.
type labels struct {
	names []string
	swap  bool
}

func newLabels(names ...string) labels {
	if len(names) > 2 {
		panic("metrics: more than two labels") // a programming error, at New
	}
	l := labels{names: names}
	if len(names) == 2 && names[1] < names[0] {
		l = labels{names: []string{names[1], names[0]}, swap: true}
	}
	return l
}

// key orders the values given in the callers' order as the names are.
func (l labels) key(a, b string) [2]string {
	if l.swap {
		return [2]string{b, a}
	}
	return [2]string{a, b}
}

// vec is a family's children by label values.
type vec[T any] struct {
	labels
	mu    sync.RWMutex
	kids  map[[2]string]*T
	fresh func() *T
}

func newVec[T any](fresh func() *T, names ...string) *vec[T] {
	return &vec[T]{labels: newLabels(names...), kids: map[[2]string]*T{}, fresh: fresh}
}

// with returns the child of the label values a, b (callers' order; b is ""
// for one label), creating it on first use.
func (v *vec[T]) with(a, b string) *T {
	k := v.key(a, b)
	v.mu.RLock()
	c := v.kids[k]
	v.mu.RUnlock()
	if c != nil {
		return c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c = v.kids[k]; c == nil {
		c = v.fresh()
		v.kids[k] = c
	}
	return c
}

// sorted returns the children's keys in exposition order: by label values,
// compared in label-name order, as client_golang's registry sorted them.
func (v *vec[T]) sorted() ([][2]string, []*T) {
	v.mu.RLock()
	keys := make([][2]string, 0, len(v.kids))
	for k := range v.kids {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	kids := make([]*T, len(keys))
	for i, k := range keys {
		kids[i] = v.kids[k]
	}
	v.mu.RUnlock()
	return keys, kids
}
