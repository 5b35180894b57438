//go:build integration

package openflow

import (
	"strings"
	"testing"
)

func TestExtraFlowsDecodedByOVS(t *testing.T) {
	for _, f := range extraFlows() {
		msg, err := AppendFlowMod(nil, 9, &FlowMod{Command: CmdAdd, Flow: f})
		if err != nil {
			t.Fatalf("%s: %v", f.String(), err)
		}
		got := ofpPrint(t, msg)
		m := flowModRe.FindStringSubmatch(got)
		if m == nil {
			t.Errorf("ofp-print for %s:\n%s", f.String(), got)
			continue
		}
		if want := flowModText(f); m[1] != want {
			t.Errorf("OVS decoded\n got: %s\nwant: %s", m[1], want)
		}
		back, err := DecodeFlowMod(msg)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if back.Flow.String() != f.String() || back.Flow.Key() != f.Key() {
			t.Errorf("round trip\n got: %s\nwant: %s", back.Flow.String(), f.String())
		}
	}
}

func TestMessagesDecodedByOVS(t *testing.T) {
	f := referenceFlows()[6].flow
	cases := []struct {
		msg  []byte
		want string
	}{
		{AppendHello(nil, 1), "OFPT_HELLO (OF1.3) (xid=0x1):\n version bitmap: 0x04"},
		{AppendSimple(nil, TypeEchoRequest, 2, nil), "OFPT_ECHO_REQUEST (OF1.3) (xid=0x2): 0 bytes of payload"},
		{AppendSimple(nil, TypeFeaturesRequest, 3, nil), "OFPT_FEATURES_REQUEST (OF1.3) (xid=0x3):"},
		{AppendSimple(nil, TypeBarrierRequest, 4, nil), "OFPT_BARRIER_REQUEST (OF1.3) (xid=0x4):"},
		{AppendFlowStatsRequest(nil, 5, TableAll, 0x42, ^uint64(0)), "OFPST_FLOW request (OF1.3) (xid=0x5):"},
		{AppendFlowStatsRequest(nil, 5, 60, 0, 0), "OFPST_FLOW request (OF1.3) (xid=0x5): table=60"},
		{must(AppendFlowMod(nil, 6, &FlowMod{Command: CmdModifyStrict, Flow: f})), "OFPT_FLOW_MOD (OF1.3) (xid=0x6): MOD_STRICT table:60 priority=90,dl_vlan=1,dl_dst=fa:16:3e:18:c9:a5 actions=set_field:0x3->reg5,set_field:0x1->reg6,pop_vlan,resubmit(,81)"},
		{must(AppendFlowMod(nil, 7, &FlowMod{Command: CmdDeleteStrict, Flow: Flow{Table: 60, Priority: 90, Match: f.Match}})), "OFPT_FLOW_MOD (OF1.3) (xid=0x7): DEL_STRICT table:60 priority=90,dl_vlan=1,dl_dst=fa:16:3e:18:c9:a5 actions=drop"},
		{must(AppendFlowMod(nil, 8, &FlowMod{Command: CmdDelete, CookieMask: ^uint64(0), Flow: Flow{Table: TableAll, Cookie: 0x42}})), "OFPT_FLOW_MOD (OF1.3) (xid=0x8): DEL table:255 priority=0 cookie:0x42/0xffffffffffffffff actions=drop"},
		{AppendBundleControl(nil, 9, 1, bundleOpenReq, bundleFlagAtomic|bundleFlagOrdered), "ONFT_BUNDLE_CONTROL (OF1.3) (xid=0x9):\n bundle_id=0x1 type=OPEN_REQUEST flags=atomic ordered"},
		{AppendBundleControl(nil, 10, 1, bundleCommitReq, bundleFlagAtomic|bundleFlagOrdered), "ONFT_BUNDLE_CONTROL (OF1.3) (xid=0xa):\n bundle_id=0x1 type=COMMIT_REQUEST flags=atomic ordered"},
		{must(AppendBundleAddFlowMod(nil, 11, 1, bundleFlagAtomic|bundleFlagOrdered, &FlowMod{Command: CmdAdd, Flow: f})), "ONFT_BUNDLE_ADD_MESSAGE (OF1.3) (xid=0xb):\n bundle_id=0x1 flags=atomic ordered\nOFPT_FLOW_MOD (OF1.3) (xid=0xb): ADD table:60 priority=90,dl_vlan=1,dl_dst=fa:16:3e:18:c9:a5 cookie:0x6610498854de8082 actions=set_field:0x3->reg5,set_field:0x1->reg6,pop_vlan,resubmit(,81)"},
	}
	for _, tc := range cases {
		got := ofpPrint(t, tc.msg)
		if strings.TrimSpace(got) != tc.want {
			t.Errorf("ofp-print\n got: %q\nwant: %q", got, tc.want)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
