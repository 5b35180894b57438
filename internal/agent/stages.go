package agent

import "time"

// stageClock follows one port from the first OVSDB event not yet answered
// by a report to the server's reply, so that the metrics can say whose time
// a slow plug was: ovs-vswitchd's (attaching the interface), the server's
// (the port's details, a free update_device_list slot, the call itself) or
// the agent's own (wiring). The agent's own share is the target of issue 4
// (≤ 20 ms per batch); the end-to-end figure alone cannot show it.
type stageClock struct {
	seen    time.Time // first event of this episode (zero: nothing pending)
	ofport  time.Time // ovs-vswitchd gave the interface an ofport
	details time.Time // the port's details were in hand
	wired   time.Time // flows committed and tag written: ready to report
	sent    time.Time // first update_device_list that carried it up
	// dataplane is the part of the wiring batch spent on the switch: the
	// OVSDB tag transaction and the OpenFlow bundles until ovsdb-server and
	// ovs-vswitchd confirmed them. It is inside agentStart..wired and is
	// reported as its own stage, so that "agent" is the agent's own work.
	dataplane time.Duration
}

// The stage labels of ovsagent_port_wiring_stage_seconds.
const (
	stageVswitchd    = "vswitchd"
	stageServerData  = "server_data"
	stageAgent       = "agent"
	stageDataplane   = "dataplane"
	stageReportQueue = "report_queue"
	stageServer      = "server"
)

// start opens an episode at t unless one is open.
func (c *stageClock) start(t time.Time) {
	if c.seen.IsZero() {
		c.seen = t
	}
}

// mark stamps one step of the open episode, once.
func (c *stageClock) mark(step *time.Time, t time.Time) {
	if !c.seen.IsZero() && step.IsZero() {
		*step = t
	}
}

// reset closes the episode.
func (c *stageClock) reset() { *c = stageClock{} }

// agentStart is when the port was in the agent's hands with everything it
// needs: the latest of the event, the ofport and the details.
func (c *stageClock) agentStart() time.Time {
	t := c.seen
	for _, s := range []time.Time{c.ofport, c.details} {
		if s.After(t) {
			t = s
		}
	}
	return t
}

// sentStages returns the stages that end when the port's report is sent
// (all but the server's reply), in order; a step never stamped is left out.
func (c *stageClock) sentStages() []stageSpan {
	var out []stageSpan
	if !c.ofport.IsZero() {
		out = append(out, stageSpan{stageVswitchd, nonNeg(c.ofport.Sub(c.seen))})
	}
	if !c.details.IsZero() {
		from := c.seen
		if c.ofport.After(from) {
			from = c.ofport
		}
		out = append(out, stageSpan{stageServerData, nonNeg(c.details.Sub(from))})
	}
	if !c.wired.IsZero() {
		wiring := nonNeg(c.wired.Sub(c.agentStart()))
		dp := min(c.dataplane, wiring)
		out = append(out, stageSpan{stageAgent, wiring - dp})
		out = append(out, stageSpan{stageDataplane, dp})
		out = append(out, stageSpan{stageReportQueue, nonNeg(c.sent.Sub(c.wired))})
	}
	return out
}

type stageSpan struct {
	stage string
	d     time.Duration
}

func nonNeg(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// observeSent records a port's stages up to its report being sent (the
// first time only: a retried call does not count them twice).
func (a *Agent) observeSent(p *portRec, sent time.Time) {
	c := &p.clock
	if c.seen.IsZero() || !c.sent.IsZero() {
		return
	}
	c.sent = sent
	for _, s := range c.sentStages() {
		a.d.Metrics.ObserveWiringStage(s.stage, s.d)
	}
}

// observeReplied records the server's stage and the end-to-end latency of
// a port reported up, and closes its episode.
func (a *Agent) observeReplied(p *portRec, replied time.Time) {
	c := &p.clock
	if c.seen.IsZero() {
		return
	}
	if !c.sent.IsZero() {
		a.d.Metrics.ObserveWiringStage(stageServer, nonNeg(replied.Sub(c.sent)))
	}
	a.d.Metrics.ObservePortWiring(replied.Sub(c.seen))
	c.reset()
}

// markWired stamps every port whose report up could go now: wired on its
// VLAN, tag written, and (the caller's condition) its flows committed;
// dataplane is what this batch spent waiting on the switch.
func (a *Agent) markWired(now time.Time, dataplane time.Duration) {
	for _, p := range a.ports {
		if p.want == reportUp && p.wired == wiredUp && p.tagOK && !p.clock.seen.IsZero() && p.clock.wired.IsZero() && !a.flowsRejected(p.id) {
			p.clock.wired = now
			p.clock.dataplane = dataplane
		}
	}
}
