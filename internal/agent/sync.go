package agent

import (
	"context"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// adopt takes over the dataplane an earlier run left: each network keeps
// the local VLAN its ports carry (the reference's _restore_local_vlan_map),
// so re-wiring them writes nothing and moves no packet.
func (a *Agent) adopt(vifs []VIF) {
	var existing []pipeline.ExistingTag
	for _, v := range vifs {
		if v.Tag < 0 || v.OtherConfig["net_uuid"] == "" {
			continue
		}
		existing = append(existing, pipeline.ExistingTag{
			Port: v.Name, Tag: v.Tag,
			NetUUID:        v.OtherConfig["net_uuid"],
			SegmentationID: v.OtherConfig["segmentation_id"],
		})
	}
	for _, msg := range a.maps.Adopt(existing) {
		a.log.Warn("agent: adopting local VLANs: " + msg)
	}
	if len(existing) > 0 {
		a.log.Info("agent: adopting existing dataplane", "vifs", len(vifs), "tagged", len(existing))
	}
}

// reportLoop sends report_state every ReportInterval; a "revived" answer
// asks the loop for a full resync. It runs on its own goroutine so a slow
// server never stalls wiring.
func (a *Agent) reportLoop(ctx context.Context) {
	if !a.waitReportGates(ctx) {
		return
	}
	t := time.NewTicker(a.opt.ReportInterval)
	defer t.Stop()
	for {
		a.reportOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.reportNow:
		}
	}
}

// waitReportGates holds the first report_state until every
// feature.ReportGate's part is known, at most one ReportInterval (the
// reference fetches its DVR MAC before its first report: that report says
// in_distributed_mode true). False: ctx ended.
func (a *Agent) waitReportGates(ctx context.Context) bool {
	ok, cut := feature.WaitReportGates(ctx, a.features.All(), a.opt.ReportInterval)
	if cut {
		a.log.Warn("agent: first report_state sent before every feature's part is known", "waited", a.opt.ReportInterval)
	}
	return ok
}

func (a *Agent) reportOnce(ctx context.Context) {
	start := a.reportStart.Load()
	t0 := time.Now()
	res, err := a.d.Reporter.ReportState(ctx, start, a.devicesCount())
	a.observeRPC("report_state", time.Since(t0), err)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("agent: report_state failed", "err", err)
		}
		return
	}
	if start {
		a.reportStart.CompareAndSwap(true, false)
	}
	if res == "revived" {
		a.log.Info("agent: server says revived: full resync")
		a.Notify(Resync{Reason: ResyncRevived})
	}
}
