package fakes

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
)

// Host is the agent's side of the feature seam (feature.Host) for a feature
// tested alone: it records the owners touched and the data notified (the
// test hands the data to the feature's HandleEvent itself). Its clock
// stands at Clock until the test moves it; Backoff(n) is n × Step (a
// second when Step is zero). Safe for concurrent use.
type Host struct {
	Bridges feature.BridgeLayout // Layout's answer
	Clock   time.Time            // Now's answer
	Step    time.Duration        // Backoff's unit

	mu      sync.Mutex
	touched []string
	events  []any
}

var _ feature.Host = (*Host)(nil)

// Touch implements feature.Host: the owners are recorded.
func (h *Host) Touch(owners ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.touched = append(h.touched, owners...)
}

// Layout implements feature.Host.
func (h *Host) Layout() feature.BridgeLayout { return h.Bridges }

// Cookie implements feature.Host: no OpenFlow, 0.
func (h *Host) Cookie(string) uint64 { return 0 }

// Log implements feature.Host: discarded.
func (h *Host) Log() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Now implements feature.Host.
func (h *Host) Now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Clock
}

// Advance moves the clock by d and returns the new time.
func (h *Host) Advance(d time.Duration) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Clock = h.Clock.Add(d)
	return h.Clock
}

// Backoff implements feature.Host.
func (h *Host) Backoff(failures int) time.Duration {
	step := h.Step
	if step == 0 {
		step = time.Second
	}
	return time.Duration(failures) * step
}

// ObserveRPC implements feature.Host: nothing recorded.
func (h *Host) ObserveRPC(string, time.Duration, error) {}

// Notify implements feature.Host: the data is recorded (Events).
func (h *Host) Notify(data any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, data)
}

// Touched reports whether owner was touched since the last Reset or Take.
func (h *Host) Touched(owner string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.touched, owner)
}

// AnyTouched reports whether any owner was touched since the last Reset or
// Take.
func (h *Host) AnyTouched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.touched) > 0
}

// Take returns the owners touched since the last Reset or Take, sorted,
// and forgets them.
func (h *Host) Take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.touched
	h.touched = nil
	slices.Sort(t)
	return t
}

// Events returns the data notified since the last Reset, in order.
func (h *Host) Events() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// Reset forgets the owners touched and the data notified.
func (h *Host) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.touched, h.events = nil, nil
}

// String lists the owners touched (for failure messages).
func (h *Host) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.touched, ",")
}
