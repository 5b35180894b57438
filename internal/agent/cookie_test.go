package agent

import (
	"testing"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

func TestNewRoundCookieTagged(t *testing.T) {
	seen := map[uint64]bool{}
	for i := 0; i < 1000; i++ {
		c := newRoundCookie()
		if c&ownCookieMask != ownCookieTag || c>>63 != 0 {
			t.Fatalf("cookie %#x: want our tag %#x in the low bits and bit 63 clear", c, ownCookieTag)
		}
		seen[c] = true
	}
	if len(seen) < 990 {
		t.Fatalf("only %d distinct cookies of 1000", len(seen))
	}
}

func TestOwnCookie(t *testing.T) {
	fl := func(cookies ...uint64) []openflow.InstalledFlow {
		var out []openflow.InstalledFlow
		for _, c := range cookies {
			out = append(out, openflow.InstalledFlow{Flow: openflow.Flow{Cookie: c}})
		}
		return out
	}
	ours1 := uint64(0x1234_0000_0000_0000 | ownCookieTag)
	ours2 := uint64(0x0777_0000_0000_0000 | ownCookieTag)
	for _, tc := range []struct {
		name  string
		flows []openflow.InstalledFlow
		want  uint64
		n     int
	}{
		{"empty bridge", nil, 0, 0},
		{"reference agent's flows only", fl(0x9f3c2a1b5d4e6f70, 0x9f3c2a1b5d4e6f70, 0), 0, 0},
		{"our previous run", fl(ours1, ours1, 0x9f3c2a1b5d4e6f70), ours1, 2},
		{"two rounds (a restart cut short): the larger", fl(ours2, ours1, ours1, ours2, ours1), ours1, 3},
		{"a tie: the smaller, so that every caller picks the same", fl(ours1, ours2), ours2, 1},
	} {
		got, n := ownCookie(tc.flows)
		if got != tc.want || n != tc.n {
			t.Errorf("%s: ownCookie = %#x, %d; want %#x, %d", tc.name, got, n, tc.want, tc.n)
		}
	}
}
