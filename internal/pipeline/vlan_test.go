package pipeline

import (
	"fmt"
	"math/rand"
	"testing"
)

func mustAlloc(t *testing.T, m *VLANManager, k NetKey) uint16 {
	t.Helper()
	v, err := m.Allocate(k)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVLANAllocateLowestFree(t *testing.T) {
	m := NewVLANManager()
	a, b, c := Seg("a", 1), NoSeg("b"), Seg("c", 3)
	for i, k := range []NetKey{a, b, c} {
		if v := mustAlloc(t, m, k); v != uint16(i+1) {
			t.Errorf("%s = %d, want %d", k, v, i+1)
		}
	}
	if v := mustAlloc(t, m, b); v != 2 {
		t.Errorf("re-allocate b = %d, want 2 (stable)", v)
	}
	m.Release(b)
	if _, ok := m.Get(b); ok {
		t.Error("b still allocated")
	}
	if v := mustAlloc(t, m, Seg("d", 4)); v != 2 {
		t.Errorf("d = %d, want the freed 2", v)
	}
	if v := mustAlloc(t, m, Seg("e", 5)); v != 4 {
		t.Errorf("e = %d, want 4", v)
	}
	// Same network, other segment: a separate mapping.
	if v := mustAlloc(t, m, Seg("a", 2)); v != 5 {
		t.Errorf("a/2 = %d, want 5", v)
	}
}

func TestVLANExhaustion(t *testing.T) {
	m := NewVLANManager()
	for i := 0; i < MaxLocalVLAN; i++ {
		mustAlloc(t, m, Seg("n", uint32(i)))
	}
	if _, err := m.Allocate(Seg("n", 99999)); err != ErrNoFreeVLAN {
		t.Fatalf("err = %v, want ErrNoFreeVLAN", err)
	}
	m.Release(Seg("n", 17))
	if v := mustAlloc(t, m, Seg("n", 99999)); v != 18 {
		t.Errorf("after release got %d, want 18", v)
	}
}

func TestVLANAdoptKeepsTagsAcrossRestart(t *testing.T) {
	m := NewVLANManager()
	msgs := m.Adopt([]ExistingTag{
		{Port: "tap1", Tag: 7, NetUUID: "vx", SegmentationID: "892"},
		{Port: "tap2", Tag: 7, NetUUID: "vx", SegmentationID: "892"},
		{Port: "tap3", Tag: 3, NetUUID: "flat"},
		{Port: "tap4", Tag: 4095, NetUUID: "deadnet", SegmentationID: "5"}, // dead: ignored
		{Port: "tap5", Tag: 9}, // no net_uuid: ignored
	})
	if len(msgs) != 0 {
		t.Fatalf("msgs: %v", msgs)
	}
	// A new network does not take an adopted tag.
	if v := mustAlloc(t, m, Seg("new", 1)); v != 1 {
		t.Errorf("new = %d, want 1", v)
	}
	if v := mustAlloc(t, m, Seg("vx", 892)); v != 7 {
		t.Errorf("vx = %d, want adopted 7", v)
	}
	if v := mustAlloc(t, m, Seg("new2", 1)); v != 2 {
		t.Errorf("new2 = %d, want 2", v)
	}
	if v := mustAlloc(t, m, Seg("new3", 1)); v != 4 {
		t.Errorf("new3 = %d, want 4 (3 is hinted for flat)", v)
	}
	// flat never came back: disposing the hints frees 3.
	m.DisposeHints()
	if v := mustAlloc(t, m, Seg("new4", 1)); v != 3 {
		t.Errorf("new4 = %d, want 3 after DisposeHints", v)
	}
	if v := mustAlloc(t, m, NoSeg("flat")); v == 3 {
		t.Errorf("flat kept its disposed hint")
	}
}

// TestVLANAdoptConflictsDeterministic: whatever order OVSDB returns rows in,
// conflicting claims resolve the same way.
func TestVLANAdoptConflictsDeterministic(t *testing.T) {
	rows := []ExistingTag{
		// net A on tag 5 (2 ports) and tag 6 (1 port): keeps 5.
		{Port: "a1", Tag: 5, NetUUID: "A", SegmentationID: "1"},
		{Port: "a2", Tag: 5, NetUUID: "A", SegmentationID: "1"},
		{Port: "a3", Tag: 6, NetUUID: "A", SegmentationID: "1"},
		// tag 8 claimed by B (1 port) and C (1 port): tie -> smaller key B.
		{Port: "b1", Tag: 8, NetUUID: "B", SegmentationID: "2"},
		{Port: "c1", Tag: 8, NetUUID: "C", SegmentationID: "3"},
		// tag 9 claimed by D (1) and E (2): E wins.
		{Port: "d1", Tag: 9, NetUUID: "D"},
		{Port: "e1", Tag: 9, NetUUID: "E"},
		{Port: "e2", Tag: 9, NetUUID: "E"},
		// bad segmentation id: reported, ignored.
		{Port: "x1", Tag: 11, NetUUID: "X", SegmentationID: "abc"},
	}
	want := map[NetKey]uint16{Seg("A", 1): 5, Seg("B", 2): 8, NoSeg("E"): 9}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 50; i++ {
		perm := append([]ExistingTag(nil), rows...)
		r.Shuffle(len(perm), func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
		m := NewVLANManager()
		msgs := m.Adopt(perm)
		if len(msgs) != 4 { // A's tag 6, C, D, X
			t.Fatalf("msgs = %v", msgs)
		}
		for k, v := range want {
			if got := mustAlloc(t, m, k); got != v {
				t.Fatalf("perm %d: %s = %d, want %d", i, k, got, v)
			}
		}
		// Losers get fresh VLANs, never one of the adopted tags.
		for _, k := range []NetKey{Seg("C", 3), NoSeg("D")} {
			if v := mustAlloc(t, m, k); v == 5 || v == 8 || v == 9 {
				t.Fatalf("%s got adopted tag %d", k, v)
			}
		}
	}
}

func TestVLANAdoptAfterAllocationIsIgnored(t *testing.T) {
	m := NewVLANManager()
	mustAlloc(t, m, Seg("A", 1)) // 1
	msgs := m.Adopt([]ExistingTag{{Port: "p", Tag: 1, NetUUID: "B"}, {Port: "q", Tag: 9, NetUUID: "A", SegmentationID: "1"}})
	if len(msgs) != 1 {
		t.Errorf("msgs = %v", msgs)
	}
	if v, _ := m.Get(Seg("A", 1)); v != 1 {
		t.Errorf("A moved to %d", v)
	}
	if v := mustAlloc(t, m, NoSeg("B")); v == 1 {
		t.Error("B took A's VLAN")
	}
	if m.Len() != 2 || len(m.Allocations()) != 2 {
		t.Errorf("len %d", m.Len())
	}
}

func BenchmarkVLANAllocateRelease(b *testing.B) {
	m := NewVLANManager()
	keys := make([]NetKey, 1000)
	for i := range keys {
		keys[i] = Seg(fmt.Sprintf("net-%d", i), uint32(i))
		if _, err := m.Allocate(keys[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		m.Release(k)
		if _, err := m.Allocate(k); err != nil {
			b.Fatal(err)
		}
	}
}
