package pipeline

import (
	"testing"

	"github.com/ovsagent/ovsagent/internal/feature"
)

// TestSetBridges: the layout's bridges, patch ofports and each bridge's
// cookie go into the state; a layout without br-tun drops it.
func TestSetBridges(t *testing.T) {
	s := NewState(Config{})
	l := feature.BridgeLayout{Integration: "br-int", Tunnel: "br-tun", PatchTun: 2, PatchInt: 3,
		Physical: map[string]feature.PhysBridge{"physnet1": {Bridge: "br-phys", IntOFPort: 4, PhyOFPort: 5}}}
	cookies := map[string]uint64{"br-int": 0x10a65, "br-tun": 0x20a65, "br-phys": 0x30a65}
	s.SetBridges(l, func(br string) uint64 { return cookies[br] })
	if s.Int.Name != "br-int" || s.Int.PatchTunOfport != 2 || s.Tun == nil || s.Tun.PatchIntOfport != 3 {
		t.Fatalf("bridges %+v %+v", s.Int, s.Tun)
	}
	if pb := s.Phys["physnet1"]; pb == nil || pb.IntOfport != 4 || pb.PhysOfport != 5 {
		t.Fatalf("physical bridge %+v", pb)
	}
	for br, c := range cookies {
		if got := s.BridgeCookie(br); got != c {
			t.Errorf("%s cookie %#x, want %#x", br, got, c)
		}
	}
	if s.BridgeCookie("br-other") != 0 || s.BridgeCookie("") != 0 {
		t.Error("a bridge the state does not have has a cookie")
	}
	l.Tunnel = ""
	s.SetBridges(l, nil)
	if s.Tun != nil || s.BridgeCookie("br-int") != 0 || s.BridgeCookie("br-tun") != 0 {
		t.Errorf("without br-tun and OpenFlow: tun %+v, br-int cookie %#x", s.Tun, s.BridgeCookie("br-int"))
	}
}
