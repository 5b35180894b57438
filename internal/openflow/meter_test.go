//go:build integration

package openflow

import (
	"bytes"
	"context"
	"net"
	"reflect"
	"strings"
	"testing"
)

func TestMeterModCodec(t *testing.T) {
	for _, mm := range []MeterMod{
		{Command: MeterAdd, Meter: MeterConfig{ID: 7, Flags: MeterKbps | MeterBurst, Rate: 10000, Burst: 8000}},
		{Command: MeterModify, Meter: MeterConfig{ID: 0x10000, Flags: MeterPktps, Rate: 2000}},
		{Command: MeterDelete, Meter: MeterConfig{ID: 9}},
	} {
		b := AppendMeterMod(nil, 42, &mm)
		got, err := DecodeMeterMod(b)
		if err != nil {
			t.Fatal(err)
		}
		if got != mm {
			t.Errorf("round trip %+v -> %+v", mm, got)
		}
	}
	// ofp_meter_mod with one ofp_meter_band_drop, as OpenFlow 1.3.x 7.3.4.5 lays it out
	want := []byte{4, 29, 0, 32, 0, 0, 0, 1, // header
		0, 0, 0, 5, 0, 0, 0, 3, // command add, flags kbps|burst, meter 3
		0, 1, 0, 16, 0, 0, 0x27, 0x10, 0, 0, 0x1f, 0x40, 0, 0, 0, 0} // drop 10000 burst 8000
	got := AppendMeterMod(nil, 1, &MeterMod{Command: MeterAdd, Meter: MeterConfig{ID: 3, Flags: MeterKbps | MeterBurst, Rate: 10000, Burst: 8000}})
	if !bytes.Equal(got, want) {
		t.Errorf("meter_mod\n got %x\nwant %x", got, want)
	}
	if _, err := DecodeMeterMod(append(want[:16:16], 0, 2, 0, 16, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0)); err == nil {
		t.Error("a dscp_remark band decoded as ours")
	}
}

func TestPlanMeters(t *testing.T) {
	kb := func(id, rate, burst uint32) MeterConfig {
		f := uint16(MeterKbps)
		if burst != 0 {
			f |= MeterBurst
		}
		return MeterConfig{ID: id, Flags: f, Rate: rate, Burst: burst}
	}
	have := map[uint32]MeterConfig{1: kb(1, 1000, 0), 2: kb(2, 2000, 100), 3: kb(3, 3000, 0), 5: kb(5, 5000, 0)}
	have[5] = MeterConfig{ID: 5, Flags: MeterKbps | MeterStats, Rate: 5000}
	want := map[uint32]MeterConfig{1: kb(1, 1000, 0), 2: kb(2, 2000, 200), 4: kb(4, 4000, 0), 5: kb(5, 5000, 0), 3: {Flags: MeterPktps, Rate: 3000}}
	before, after := PlanMeters(have, want)
	wantBefore := []MeterMod{
		{MeterModify, kb(2, 2000, 200)},
		{MeterModify, MeterConfig{ID: 3, Flags: MeterPktps, Rate: 3000}},
		{MeterAdd, kb(4, 4000, 0)},
	}
	if !reflect.DeepEqual(before, wantBefore) || len(after) != 0 {
		t.Errorf("before %+v after %+v", before, after)
	}
	_, after = PlanMeters(have, map[uint32]MeterConfig{2: kb(2, 2000, 100)})
	if len(after) != 3 || after[0].Meter.ID != 1 || after[2].Meter.ID != 5 || after[1].Command != MeterDelete {
		t.Errorf("after %+v", after)
	}
}

// TestMetersOnOVS adds, modifies and deletes meters and a flow with a meter
// instruction on a private netdev bridge and reads them back with our decoder and with
// ovs-ofctl.
func TestMetersOnOVS(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	feat, err := c.MeterFeatures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !feat.Supported() {
		t.Fatalf("userspace datapath reports no meters: %+v", feat)
	}
	t.Logf("meter features %+v", feat)
	want := map[uint32]MeterConfig{
		1: {ID: 1, Flags: MeterKbps | MeterBurst, Rate: 10000, Burst: 8000},
		2: {ID: 2, Flags: MeterPktps, Rate: 1000},
	}
	before, _ := PlanMeters(nil, want)
	if err := c.MeterMods(ctx, before); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("fa:16:3e:00:00:01")
	flows := []Flow{
		// 2026.2: PACKET_RATE_LIMIT 58 -> BANDWIDTH_RATE_LIMIT 59 -> TRANSIENT 60
		{Table: 59, Priority: 100, Cookie: 0x1, Match: Match{InPort(1), EthSrc(mac)}, Actions: []Action{Meter{ID: 1}, GotoTable{60}}},
		{Table: 58, Priority: 100, Cookie: 0x1, Match: Match{DlVlan(3), EthDst(mac)}, Actions: []Action{Meter{ID: 2}, GotoTable{59}}},
		{Table: 0, Priority: 65535, Cookie: 0x1, Match: Match{InPort(1), Reg(2, 0), EthType(EthTypeIPv4)},
			Actions: []Action{SetReg(2, 1), SetField{Field: MatchField{Field: FieldIPDSCP, Value: 26}}, Resubmit{InPort: u32p(1), Table: 255}}},
		{Table: 0, Priority: 200, Cookie: 0x1, Match: Match{Reg(3, 0)},
			Actions: []Action{SetQueue{Queue: 0}, Load{Dst: RegRef(3, 0, 1), Value: 1}, ResubmitTable(0)}},
	}
	if err := c.Bundle(ctx, adds(flows)); err != nil {
		t.Fatal(err)
	}
	got, err := c.DumpMeters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, m := range got {
		m.Flags &^= MeterStats
		got[id] = m
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dumped meters %+v, want %+v", got, want)
	}
	dumped, err := c.DumpFlows(ctx, TableAll, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, f := range dumped {
		ours = append(ours, f.String())
	}
	ofctl := ofctlDump(t, o, br)
	for _, f := range flows {
		s := f.String()
		found := false
		for _, l := range ofctl {
			if strings.Contains(l, strings.TrimPrefix(s, "cookie=0x1, ")) {
				found = true
			}
		}
		if !found {
			t.Errorf("ovs-ofctl has no %q in\n%s", s, strings.Join(ofctl, "\n"))
		}
		if !contains(ours, s) {
			t.Errorf("our dump has no %q in\n%s", s, strings.Join(ours, "\n"))
		}
	}
	out, err := o.Ofctl("dump-meters", br, "-O", "OpenFlow13")
	if err != nil {
		t.Fatal(err)
	}
	out = strings.ReplaceAll(out, "bands=\n", "bands=") // ovs-ofctl breaks the line there
	for _, m := range want {
		if !strings.Contains(out, m.String()) {
			t.Errorf("ovs-ofctl dump-meters has no %q:\n%s", m.String(), out)
		}
	}
	// modify (rate, burst, flags) and delete
	want2 := map[uint32]MeterConfig{1: {ID: 1, Flags: MeterPktps | MeterBurst, Rate: 500, Burst: 50}}
	before, after := PlanMeters(got, want2)
	if err := c.MeterMods(ctx, before); err != nil {
		t.Fatal(err)
	}
	if err := c.MeterMods(ctx, after); err != nil {
		t.Fatal(err)
	}
	got, err = c.DumpMeters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m := got[1]; len(got) != 1 || m.Flags&^MeterStats != want2[1].Flags || m.Rate != 500 || m.Burst != 50 {
		t.Errorf("after modify/delete %+v", got)
	}
	// OpenFlow 1.3: deleting a meter removes the flows that use it
	left, err := c.DumpFlows(ctx, 58, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("table 58 kept %v after its meter went", left)
	}
	// an error names the mod
	err = c.MeterMods(ctx, []MeterMod{{Command: MeterModify, Meter: MeterConfig{ID: 77, Flags: MeterKbps, Rate: 1}}})
	if err == nil || !strings.Contains(err.Error(), "modify 77") {
		t.Errorf("modify of a missing meter: %v", err)
	}
}

func u32p(v uint32) *uint32 { return &v }

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
