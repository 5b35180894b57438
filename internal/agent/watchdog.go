package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The loop's watchdog. Every wait inside a batch is bounded (OpenFlow by
// of_request_timeout, OVSDB by ovsdb_timeout, the server by the RPC
// timeouts), so a batch that runs long comes back by itself; until it does
// the agent applies nothing else and its in-sync flag is as old as the
// batch. Readiness says so (LoopCheck) and the log says it once. Liveness
// (Alive) does not: restarting the agent in a wiring burst or an outage of
// the server would only lose the work in hand.

const (
	loopNotStarted int32 = iota
	loopRunning
	loopStopped
)

// defaultStuckAfter: a batch is a few seconds even at 1,000 ports; one that
// has run for a minute is waiting on something that does not answer.
const defaultStuckAfter = time.Minute

// beginWork marks the loop busy (a batch, or the bridges' setup) from now.
func (a *Agent) beginWork() { a.busySince.Store(time.Now().UnixNano()) }

// endWork marks the loop waiting for work again.
func (a *Agent) endWork() { a.busySince.Store(0) }

// LoopCheck is the loop's part of readiness: nil while the loop waits for
// work or its current batch is younger than Options.StuckAfter. Safe from
// any goroutine.
func (a *Agent) LoopCheck() error {
	switch a.loopState.Load() {
	case loopNotStarted:
		return errors.New("agent loop not started")
	case loopStopped:
		return errors.New("agent loop stopped")
	}
	if d := a.busyFor(); d > a.opt.StuckAfter {
		return fmt.Errorf("agent loop stuck: one batch running for %s (more than %s)", d.Round(time.Millisecond), a.opt.StuckAfter)
	}
	return nil
}

// Alive is the loop's liveness: nil unless Run has returned. A long batch is
// not death (see above). Safe from any goroutine.
func (a *Agent) Alive() error {
	if a.loopState.Load() == loopStopped {
		return errors.New("agent loop stopped")
	}
	return nil
}

// busyFor is how long the current batch has run (0 while the loop waits).
func (a *Agent) busyFor() time.Duration {
	since := a.busySince.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// watchLoop logs a batch that runs longer than StuckAfter, once, and when
// the loop comes back from it.
func (a *Agent) watchLoop(ctx context.Context) {
	t := time.NewTicker(a.opt.StuckAfter / 4)
	defer t.Stop()
	var stuck int64 // busySince of the batch reported stuck
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		since := a.busySince.Load()
		if stuck != 0 && since != stuck {
			a.log.Warn("agent: loop resumed after a stuck batch", "stuck_for", time.Since(time.Unix(0, stuck)).Round(time.Millisecond))
			stuck = 0
		}
		if since != 0 && since != stuck && a.busyFor() > a.opt.StuckAfter {
			stuck = since
			a.log.Error("agent: loop stuck: one batch has been running longer than the bound; not ready until it returns",
				"for", a.busyFor().Round(time.Millisecond), "bound", a.opt.StuckAfter)
		}
	}
}
