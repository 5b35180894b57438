//go:build integration

package openflow

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const benchN = 10000

func clearBridge(b *testing.B, c *Conn) {
	b.Helper()
	if err := c.Bundle(context.Background(), []FlowMod{{Command: CmdDelete, Flow: Flow{Table: TableAll}}}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBundle10k: 10,000 flows in one native ONF bundle (op = 10k flows).
func BenchmarkBundle10k(b *testing.B) {
	_, _, c := testBridge(b, Options{})
	mods := adds(genFlows(benchN, 0x77))
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clearBridge(b, c)
		b.StartTimer()
		if err := c.Bundle(ctx, mods); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

// BenchmarkOfctlBundle10k: the same flows through
// `ovs-ofctl -O OpenFlow13 --bundle add-flows FILE`, for comparison.
func BenchmarkOfctlBundle10k(b *testing.B) {
	o, br, c := testBridge(b, Options{})
	var sb strings.Builder
	for _, f := range genFlows(benchN, 0x77) {
		sb.WriteString(strings.TrimSpace(strings.Replace(f.String(), " actions=", ",actions=", 1)))
		sb.WriteByte('\n')
	}
	file := filepath.Join(b.TempDir(), "flows.txt")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(sb.String(), ", ", ",")), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clearBridge(b, c)
		b.StartTimer()
		cmd := exec.Command("ovs-ofctl", "-O", "OpenFlow13", "--bundle", "add-flows", "unix:"+o.Mgmt(br), file)
		cmd.Env = o.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v %s", err, out)
		}
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

// BenchmarkDumpByCookie10k: dump 10,000 flows selected by cookie (beside 1,000 others).
func BenchmarkDumpByCookie10k(b *testing.B) {
	_, _, c := testBridge(b, Options{})
	ctx := context.Background()
	if err := c.Bundle(ctx, adds(genFlows(benchN, 0x77))); err != nil {
		b.Fatal(err)
	}
	other := genFlows(1000, 0x88)
	for i := range other {
		other[i].Table = 61
	}
	if err := c.Bundle(ctx, adds(other)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fs, err := c.DumpFlows(ctx, TableAll, 0x77, ^uint64(0))
		if err != nil || len(fs) != benchN {
			b.Fatalf("%d flows, %v", len(fs), err)
		}
	}
}

// BenchmarkOfctlDumpByCookie10k: the same dump through ovs-ofctl, for comparison.
func BenchmarkOfctlDumpByCookie10k(b *testing.B) {
	o, br, c := testBridge(b, Options{})
	ctx := context.Background()
	if err := c.Bundle(ctx, adds(genFlows(benchN, 0x77))); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "unix:"+o.Mgmt(br), "cookie=0x77/-1")
		cmd.Env = o.Env()
		out, err := cmd.Output()
		if err != nil || strings.Count(string(out), "\n") < benchN {
			b.Fatalf("%v", err)
		}
	}
}

// BenchmarkDecodeFlowStats: our CPU cost of decoding one recorded reply.
func BenchmarkDecodeFlowStats(b *testing.B) {
	msg, err := os.ReadFile(filepath.Join("testdata", "replies", "flow-stats-a.bin"))
	if err != nil {
		b.Fatal(err)
	}
	flows, _, _ := DecodeFlowStatsReply(msg)
	b.SetBytes(int64(len(msg)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := DecodeFlowStatsReply(msg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(flows))*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

type nullSwitch struct{ mods int }

func (s *nullSwitch) Bundle(_ context.Context, mods []FlowMod) error {
	s.mods += len(mods)
	for i := range mods {
		if _, err := AppendFlowMod(nil, 1, &mods[i]); err != nil {
			return err
		}
	}
	return nil
}
func (s *nullSwitch) DumpFlows(context.Context, uint8, uint64, uint64) ([]Flow, error) {
	return nil, nil
}

// BenchmarkReconcilerChurn: CPU of one Apply that changes 1 of 1,000 owners
// (10 flows each, 10,000 installed), encoding included.
func BenchmarkReconcilerChurn(b *testing.B) {
	r := NewReconciler(&nullSwitch{}, 1)
	all := map[string][]Flow{}
	for p := 0; p < 1000; p++ {
		all["port:"+strconv.Itoa(p)] = portFlows(uint32(p+1), 10)
	}
	ctx := context.Background()
	if err := r.Apply(ctx, all); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fs := portFlows(uint32(i%1000+1), 10)
		fs[0].Actions = []Action{SetReg(5, uint32(i)), ResubmitTable(71)}
		if err := r.Apply(ctx, map[string][]Flow{"port:" + strconv.Itoa(i%1000): fs}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReconcilerFull10k: CPU of the first Apply of 10,000 flows.
func BenchmarkReconcilerFull10k(b *testing.B) {
	all := map[string][]Flow{}
	for p := 0; p < 1000; p++ {
		all["port:"+strconv.Itoa(p)] = portFlows(uint32(p+1), 10)
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		r := NewReconciler(&nullSwitch{}, 1)
		if err := r.Apply(ctx, all); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdoptSwap10k: a restart's takeover of 10,000 flows: dump them,
// re-install every one under the new cookie in place, sweep, in one bundle.
func BenchmarkAdoptSwap10k(b *testing.B) {
	_, _, c := testBridge(b, Options{})
	ctx := context.Background()
	flows := genFlows(benchN, 1)
	want := map[string][]Flow{"all": flows}
	if err := NewReconciler(c, 1).Apply(ctx, want); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := NewReconciler(c, uint64(i+2))
		if err := r.Adopt(ctx); err != nil {
			b.Fatal(err)
		}
		if err := r.ApplyAndSweep(ctx, want); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if fs, err := c.DumpFlows(ctx, TableAll, uint64(b.N+1), ^uint64(0)); err != nil || len(fs) != benchN {
		b.Fatalf("after swap: %d flows with the last cookie (%v)", len(fs), err)
	}
}
