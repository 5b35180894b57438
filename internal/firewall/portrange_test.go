package firewall

import (
	"math/rand"
	"testing"
)

func TestPortRangeMasksTable(t *testing.T) {
	cases := []struct {
		min, max uint16
		want     []PortMask
	}{
		{22, 22, []PortMask{{22, 0xffff}}},
		{80, 81, []PortMask{{0x50, 0xfffe}}},
		{0, 65535, []PortMask{{0, 0}}},
		{1024, 65535, []PortMask{{0x400, 0xfc00}, {0x800, 0xf800}, {0x1000, 0xf000}, {0x2000, 0xe000}, {0x4000, 0xc000}, {0x8000, 0x8000}}},
		// The reference's own worked example: [40, 64) = 0x0028/fff8 + 0x0030/fff0.
		{40, 63, []PortMask{{0x28, 0xfff8}, {0x30, 0xfff0}}},
		{1000, 1999, []PortMask{{0x3e8, 0xfff8}, {0x3f0, 0xfff0}, {0x400, 0xfe00}, {0x600, 0xff00}, {0x700, 0xff80}, {0x780, 0xffc0}, {0x7c0, 0xfff0}}},
		{65535, 65535, []PortMask{{65535, 0xffff}}},
		{5, 4, nil},
	}
	for _, c := range cases {
		got := PortRangeMasks(c.min, c.max)
		if len(got) != len(c.want) {
			t.Errorf("%d-%d: got %v, want %v", c.min, c.max, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%d-%d: got %v, want %v", c.min, c.max, got, c.want)
				break
			}
		}
	}
	if n := len(PortRangeMasks(1, 65535)); n != 16 {
		t.Errorf("1-65535: %d masks, want 16", n)
	}
}

// minCover counts the minimal prefix cover of [lo, hi] by walking the
// binary trie: a node wholly inside counts 1, outside 0, else its children.
func minCover(a, size, lo, hi uint32) int {
	b := a + size - 1
	if b < lo || a > hi {
		return 0
	}
	if lo <= a && b <= hi {
		return 1
	}
	return minCover(a, size/2, lo, hi) + minCover(a+size/2, size/2, lo, hi)
}

func checkCover(t *testing.T, min, max uint16) {
	t.Helper()
	ms := PortRangeMasks(min, max)
	next := uint32(min)
	for _, m := range ms {
		size := uint32(^m.Mask&0xffff) + 1
		if size&(size-1) != 0 {
			t.Fatalf("%d-%d: mask %#x is not a prefix", min, max, m.Mask)
		}
		if m.Value&^m.Mask != 0 {
			t.Fatalf("%d-%d: value %#x has bits outside mask %#x", min, max, m.Value, m.Mask)
		}
		if uint32(m.Value) != next {
			t.Fatalf("%d-%d: block %#x/%#x starts at %d, want %d", min, max, m.Value, m.Mask, m.Value, next)
		}
		next += size
	}
	if next != uint32(max)+1 {
		t.Fatalf("%d-%d: cover ends at %d", min, max, next-1)
	}
	if want := minCover(0, 1<<16, uint32(min), uint32(max)); len(ms) != want {
		t.Fatalf("%d-%d: %d blocks, minimal is %d", min, max, len(ms), want)
	}
}

// Exhaustive over every range inside [0, 1100] and every range with an end
// at a 16-bit boundary, plus random ranges over the whole space.
func TestPortRangeMasksExhaustive(t *testing.T) {
	for lo := 0; lo <= 1100; lo++ {
		for hi := lo; hi <= 1100; hi++ {
			checkCover(t, uint16(lo), uint16(hi))
		}
	}
	for x := 0; x <= 65535; x++ {
		checkCover(t, uint16(x), 65535)
		checkCover(t, 0, uint16(x))
		checkCover(t, 1, uint16(max(x, 1)))
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		a, b := uint16(r.Intn(65536)), uint16(r.Intn(65536))
		if a > b {
			a, b = b, a
		}
		checkCover(t, a, b)
	}
}
