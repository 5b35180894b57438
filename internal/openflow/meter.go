package openflow

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// OpenFlow 1.3 meters (ofp_meter_mod, OFPMP_METER_CONFIG, OFPMP_METER_FEATURES). The
// reference's QoS limits bandwidth (kbps) and packet rate (pktps) with one drop band
// per meter; OVS's userspace datapath implements them.
const (
	TypeMeterMod = 29

	mpMeterStats    = 9
	mpMeterConfig   = 10
	mpMeterFeatures = 11

	meterAll = 0xffffffff // OFPM_ALL

	bandDrop = 1 // OFPMBT_DROP
)

// Meter flags (OFPMF_*).
const (
	MeterKbps  = 1
	MeterPktps = 2
	MeterBurst = 4
	MeterStats = 8
)

// MeterCommand is a meter_mod command.
type MeterCommand uint16

const (
	MeterAdd    MeterCommand = 0
	MeterModify MeterCommand = 1
	MeterDelete MeterCommand = 2
)

func (c MeterCommand) String() string {
	switch c {
	case MeterAdd:
		return "add"
	case MeterModify:
		return "modify"
	case MeterDelete:
		return "delete"
	}
	return fmt.Sprintf("meter_command(%d)", uint16(c))
}

// MeterConfig is a meter with one drop band: Rate in kbps or packets per second as
// Flags say, Burst in kb or packets (used only with MeterBurst).
type MeterConfig struct {
	ID    uint32
	Flags uint16
	Rate  uint32
	Burst uint32
}

// String renders the meter as ovs-ofctl dump-meters prints it
// ("meter=1 kbps burst bands=type=drop rate=10000 burst_size=8000").
func (m MeterConfig) String() string {
	var b strings.Builder
	b.WriteString("meter=")
	b.WriteString(strconv.FormatUint(uint64(m.ID), 10))
	for _, f := range []struct {
		bit  uint16
		name string
	}{{MeterKbps, "kbps"}, {MeterPktps, "pktps"}, {MeterBurst, "burst"}, {MeterStats, "stats"}} {
		if m.Flags&f.bit != 0 {
			b.WriteByte(' ')
			b.WriteString(f.name)
		}
	}
	b.WriteString(" bands=type=drop rate=")
	b.WriteString(strconv.FormatUint(uint64(m.Rate), 10))
	if m.Flags&MeterBurst != 0 {
		b.WriteString(" burst_size=")
		b.WriteString(strconv.FormatUint(uint64(m.Burst), 10))
	}
	return b.String()
}

// MeterMod is one change to the meter table.
type MeterMod struct {
	Command MeterCommand
	Meter   MeterConfig
}

// AppendMeterMod appends an OFPT_METER_MOD. A delete carries no band.
func AppendMeterMod(b []byte, xid uint32, mm *MeterMod) []byte {
	s := len(b)
	b = appendHeader(b, TypeMeterMod, xid)
	b = be16(b, uint16(mm.Command))
	b = be16(b, mm.Meter.Flags)
	b = be32(b, mm.Meter.ID)
	if mm.Command != MeterDelete {
		b = appendDropBand(b, mm.Meter)
	}
	return finish(b, s)
}

func appendDropBand(b []byte, m MeterConfig) []byte {
	b = be16(b, bandDrop)
	b = be16(b, 16)
	b = be32(b, m.Rate)
	b = be32(b, m.Burst)
	return pad(b, 4)
}

// DecodeMeterMod decodes an OFPT_METER_MOD (tests and fuzzing: the agent only sends them).
func DecodeMeterMod(msg []byte) (MeterMod, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return MeterMod{}, err
	}
	if h.Type != TypeMeterMod || len(msg) < 16 || int(h.Length) != len(msg) {
		return MeterMod{}, fmt.Errorf("openflow: not a meter_mod")
	}
	mm := MeterMod{
		Command: MeterCommand(binary.BigEndian.Uint16(msg[8:])),
		Meter:   MeterConfig{Flags: binary.BigEndian.Uint16(msg[10:]), ID: binary.BigEndian.Uint32(msg[12:])},
	}
	if err := decodeBands(msg[16:], &mm.Meter); err != nil {
		return MeterMod{}, err
	}
	return mm, nil
}

// decodeBands reads the bands of a meter; exactly one drop band is what the agent
// writes, anything else is reported so that it is replaced rather than trusted.
func decodeBands(p []byte, m *MeterConfig) error {
	n := 0
	for len(p) > 0 {
		if len(p) < 16 {
			return errShort
		}
		t, l := binary.BigEndian.Uint16(p), int(binary.BigEndian.Uint16(p[2:]))
		if l < 16 || l > len(p) {
			return fmt.Errorf("openflow: meter band length %d", l)
		}
		if t != bandDrop {
			return fmt.Errorf("openflow: meter %d has a band of type %d", m.ID, t)
		}
		m.Rate, m.Burst = binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:])
		if m.Flags&MeterBurst == 0 {
			m.Burst = 0 // unused without the flag; OVS reports its own default there
		}
		n++
		p = p[l:]
	}
	if n > 1 {
		return fmt.Errorf("openflow: meter %d has %d bands", m.ID, n)
	}
	return nil
}

// appendMultipartRequest appends an OFPT_MULTIPART_REQUEST of type mp with body.
func appendMultipartRequest(b []byte, xid uint32, mp uint16, body []byte) []byte {
	s := len(b)
	b = appendHeader(b, TypeMultipartReq, xid)
	b = be16(b, mp)
	b = be16(b, 0)
	b = pad(b, 4)
	b = append(b, body...)
	return finish(b, s)
}

// AppendMeterConfigRequest asks for the configuration of every meter.
func AppendMeterConfigRequest(b []byte, xid uint32) []byte {
	return appendMultipartRequest(b, xid, mpMeterConfig, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
}

// AppendMeterFeaturesRequest asks for the switch's meter features.
func AppendMeterFeaturesRequest(b []byte, xid uint32) []byte {
	return appendMultipartRequest(b, xid, mpMeterFeatures, nil)
}

// multipartBody checks a multipart reply of type mp and returns its body.
func multipartBody(msg []byte, mp uint16) ([]byte, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return nil, err
	}
	if h.Type != TypeMultipartReply || len(msg) < 16 || int(h.Length) != len(msg) {
		return nil, fmt.Errorf("openflow: not a multipart reply")
	}
	if t := binary.BigEndian.Uint16(msg[8:]); t != mp {
		return nil, fmt.Errorf("openflow: multipart reply of type %d, want %d", t, mp)
	}
	return msg[16:], nil
}

// DecodeMeterConfigReply decodes one OFPMP_METER_CONFIG reply message.
func DecodeMeterConfigReply(msg []byte) ([]MeterConfig, error) {
	p, err := multipartBody(msg, mpMeterConfig)
	if err != nil {
		return nil, err
	}
	var out []MeterConfig
	for len(p) > 0 {
		if len(p) < 8 {
			return nil, errShort
		}
		l := int(binary.BigEndian.Uint16(p))
		if l < 8 || l > len(p) {
			return nil, fmt.Errorf("openflow: meter config length %d", l)
		}
		m := MeterConfig{Flags: binary.BigEndian.Uint16(p[2:]), ID: binary.BigEndian.Uint32(p[4:])}
		if err := decodeBands(p[8:l], &m); err != nil {
			return nil, err
		}
		out = append(out, m)
		p = p[l:]
	}
	return out, nil
}

// MeterFeatures is the switch's OFPMP_METER_FEATURES reply.
type MeterFeatures struct {
	MaxMeter     uint32
	BandTypes    uint32
	Capabilities uint32
	MaxBands     uint8
	MaxColor     uint8
}

// Supported is the reference's check_meter_features: every feature non-zero.
func (f MeterFeatures) Supported() bool {
	return f.MaxMeter != 0 && f.BandTypes != 0 && f.Capabilities != 0 && f.MaxBands != 0
}

// DecodeMeterFeaturesReply decodes an OFPMP_METER_FEATURES reply.
func DecodeMeterFeaturesReply(msg []byte) (MeterFeatures, error) {
	p, err := multipartBody(msg, mpMeterFeatures)
	if err != nil {
		return MeterFeatures{}, err
	}
	if len(p) < 16 {
		return MeterFeatures{}, errShort
	}
	return MeterFeatures{
		MaxMeter:     binary.BigEndian.Uint32(p),
		BandTypes:    binary.BigEndian.Uint32(p[4:]),
		Capabilities: binary.BigEndian.Uint32(p[8:]),
		MaxBands:     p[12],
		MaxColor:     p[13],
	}, nil
}

// PlanMeters returns the meter_mods that turn have into want: adds and modifies (to send
// before the flows that use them) and deletes (after the flows that used them are gone).
// Both are sorted by meter id. A meter that differs only in the stats flag is equal:
// the agent never asks for stats, a switch may report them.
func PlanMeters(have, want map[uint32]MeterConfig) (before, after []MeterMod) {
	for id, w := range want {
		w.ID = id
		h, ok := have[id]
		switch {
		case !ok:
			before = append(before, MeterMod{Command: MeterAdd, Meter: w})
		case h.Flags&^MeterStats != w.Flags&^MeterStats || h.Rate != w.Rate ||
			(w.Flags&MeterBurst != 0 && h.Burst != w.Burst):
			// a modify, as the reference's update_meter: a delete would also
			// remove the flows that use the meter (OpenFlow 1.3 6.6.3)
			before = append(before, MeterMod{Command: MeterModify, Meter: w})
		}
	}
	for id := range have {
		if _, ok := want[id]; !ok {
			after = append(after, MeterMod{Command: MeterDelete, Meter: MeterConfig{ID: id}})
		}
	}
	sort.SliceStable(before, func(i, j int) bool { return before[i].Meter.ID < before[j].Meter.ID })
	sort.Slice(after, func(i, j int) bool { return after[i].Meter.ID < after[j].Meter.ID })
	return before, after
}

// MeterMods sends mods followed by a barrier and waits for it: meter_mods are not
// allowed in a bundle, so each is its own message; the first error is returned with
// the mod it names (the others were applied).
func (c *Conn) MeterMods(ctx context.Context, mods []MeterMod) error {
	if len(mods) == 0 {
		return nil
	}
	n := uint32(len(mods)) + 1
	s, lo, err := c.begin(n)
	if err != nil {
		return err
	}
	barrier := lo + n - 1
	cl, err := s.register(lo, barrier, barrier)
	if err != nil {
		return err
	}
	var buf []byte
	for i := range mods {
		buf = AppendMeterMod(buf, lo+uint32(i), &mods[i])
	}
	buf = AppendSimple(buf, TypeBarrierRequest, barrier, nil)
	if err := s.send(buf); err != nil {
		s.fail(err)
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	if err := s.wait(ctx, cl); err != nil {
		return err
	}
	for _, e := range cl.errs {
		if e.Xid >= lo && e.Xid < barrier {
			m := mods[e.Xid-lo]
			return fmt.Errorf("openflow: meter %s %d: %w", m.Command, m.Meter.ID, e)
		}
		return fmt.Errorf("openflow: meter mods: %w", e)
	}
	return nil
}

// request sends one multipart request and returns its reply messages.
func (c *Conn) request(ctx context.Context, what string, enc func(xid uint32) []byte) ([][]byte, error) {
	s, xid, err := c.begin(1)
	if err != nil {
		return nil, err
	}
	cl, err := s.register(xid, xid, xid)
	if err != nil {
		return nil, err
	}
	if err := s.send(enc(xid)); err != nil {
		s.fail(err)
		return nil, fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	if err := s.wait(ctx, cl); err != nil {
		return nil, err
	}
	if len(cl.errs) > 0 {
		return nil, fmt.Errorf("openflow: %s: %w", what, cl.errs[0])
	}
	return cl.replies, nil
}

// DumpMeters returns every meter of the bridge, by id.
func (c *Conn) DumpMeters(ctx context.Context) (map[uint32]MeterConfig, error) {
	replies, err := c.request(ctx, "dump meters", func(xid uint32) []byte { return AppendMeterConfigRequest(nil, xid) })
	if err != nil {
		return nil, err
	}
	out := map[uint32]MeterConfig{}
	for _, r := range replies {
		ms, err := DecodeMeterConfigReply(r)
		if err != nil {
			return nil, fmt.Errorf("openflow: dump meters: %w", err)
		}
		for _, m := range ms {
			out[m.ID] = m
		}
	}
	return out, nil
}

// MeterFeatures asks the switch what meters it supports.
func (c *Conn) MeterFeatures(ctx context.Context) (MeterFeatures, error) {
	replies, err := c.request(ctx, "meter features", func(xid uint32) []byte { return AppendMeterFeaturesRequest(nil, xid) })
	if err != nil {
		return MeterFeatures{}, err
	}
	if len(replies) == 0 {
		return MeterFeatures{}, fmt.Errorf("openflow: meter features: no reply")
	}
	return DecodeMeterFeaturesReply(replies[0])
}
