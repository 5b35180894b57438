package openflow

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
)

// ownerFlows is one owner's desired flows as the reconciler keeps them: in
// their wire form (~90 bytes a flow at 1,000 ports, against ~300 for a
// Flow with its match and action slices), decoded only when needed — to
// re-send an unchanged owner's flow after Adopt or Reset, to delete one, or
// for Desired and Installed. Nothing of it is modified once stored.
type ownerFlows struct {
	name   string
	cookie uint64    // every flow's (prepare sets it)
	keys   []flowKey // keys[i] is flow i's
	wire   []byte    // the flows' records, back to back (see appendRecord)
	ends   []uint32  // flow i's record is wire[ends[i-1]:ends[i]]
	// plain holds the flows as given when one of them does not encode (a
	// caller's bug: the bundle that sends it fails and reports it); wire
	// and ends are then nil.
	plain []Flow
}

// newOwnerFlows encodes fs (whose cookies are all the reconciler's) with
// their keys. Called with r.mu held: it uses r.scratch.
func (r *Reconciler) newOwnerFlows(name string, fs []Flow) *ownerFlows {
	of := &ownerFlows{name: name, cookie: r.cookie, keys: make([]flowKey, len(fs))}
	for i := range fs {
		of.keys[i] = keyOf(&fs[i])
	}
	ends := make([]uint32, len(fs))
	wire := r.scratch[:0]
	for i := range fs {
		var err error
		if wire, err = appendRecord(wire, &fs[i]); err != nil {
			of.plain = slices.Clone(fs)
			return of
		}
		ends[i] = uint32(len(wire))
	}
	r.scratch = wire
	of.wire, of.ends = slices.Clone(wire), ends // exact size: no append slack kept
	return of
}

func (of *ownerFlows) len() int { return len(of.keys) }

// record is flow i's wire record (nil for plain flows).
func (of *ownerFlows) record(i int) []byte {
	if of.plain != nil {
		return nil
	}
	start := uint32(0)
	if i > 0 {
		start = of.ends[i-1]
	}
	return of.wire[start:of.ends[i]]
}

// table is flow i's table, read without decoding the flow.
func (of *ownerFlows) table(i int) uint8 {
	if of.plain != nil {
		return of.plain[i].Table
	}
	return of.record(i)[0]
}

// flow decodes flow i. A record made by appendRecord always decodes.
func (of *ownerFlows) flow(i int) Flow {
	if of.plain != nil {
		return of.plain[i]
	}
	f, err := decodeRecord(of.record(i), of.cookie)
	if err != nil {
		panic("openflow: reconciler record does not decode: " + err.Error())
	}
	return f
}

// sameRecord: flow i of a and flow j of b are the same bytes with the
// same cookie, so equal in every part (the common case of an owner
// recomputed with few changes, decided without decoding).
func sameRecord(a *ownerFlows, i int, b *ownerFlows, j int) bool {
	return a.plain == nil && b.plain == nil && a.cookie == b.cookie && bytes.Equal(a.record(i), b.record(j))
}

// encodesAs: f (an adopted flow) encodes byte for byte as flow i of of,
// cookie included. Called with r.mu held: it uses r.scratch.
func (r *Reconciler) encodesAs(f *Flow, of *ownerFlows, i int) bool {
	if of.plain != nil || f.Cookie != of.cookie {
		return false
	}
	rec, err := appendRecord(r.scratch[:0], f)
	if err != nil {
		return false
	}
	r.scratch = rec
	return bytes.Equal(rec, of.record(i))
}

// appendRecord appends a flow as the body of a flow_mod without what the
// reconciler knows otherwise (header, cookie, command, buffer, out port and
// group): table (1 byte), priority, idle and hard timeouts, flags (2 bytes
// each), then the ofp_match (padded to 8 bytes) and the instructions.
func appendRecord(b []byte, f *Flow) ([]byte, error) {
	b = append(b, f.Table)
	b = be16(b, f.Priority)
	b = be16(b, f.IdleTimeout)
	b = be16(b, f.HardTimeout)
	b = be16(b, f.Flags)
	var err error
	if f.rawMatch != "" {
		b = append(b, f.rawMatch...)
	} else if b, err = appendMatch(b, f.Match); err != nil {
		return nil, err
	}
	return appendInstructions(b, f.Actions)
}

const recordHeader = 9

// decodeRecord is appendRecord's inverse.
func decodeRecord(p []byte, cookie uint64) (Flow, error) {
	if len(p) < recordHeader {
		return Flow{}, errors.New("openflow: short record")
	}
	f := Flow{
		Table:       p[0],
		Priority:    binary.BigEndian.Uint16(p[1:]),
		IdleTimeout: binary.BigEndian.Uint16(p[3:]),
		HardTimeout: binary.BigEndian.Uint16(p[5:]),
		Flags:       binary.BigEndian.Uint16(p[7:]),
		Cookie:      cookie,
	}
	m, n, err := decodeMatch(p[recordHeader:])
	if err != nil {
		return f, err
	}
	f.Match = m
	for _, mf := range m {
		if mf.Field == fieldUnknown {
			f.rawMatch = string(p[recordHeader : recordHeader+n])
			break
		}
	}
	f.Actions, err = decodeInstructions(p[recordHeader+n:])
	return f, err
}

// Digest summarises a list of flows, in order, in 16 bytes (a truncated
// SHA-256): two lists with the same digest send the same flow_mods (cookie
// included). The agent keeps it per owner to skip owners whose recomputed
// flows did not change; encoding is ~4 times cheaper than rendering the
// text. A flow that does not encode is summarised by its text.
func Digest(fs []Flow) [16]byte {
	h := sha256.New()
	var b []byte
	for i := range fs {
		// each flow: its length, kind (0 record, 1 text), cookie, body
		b = append(b[:0], 0, 0, 0, 0, 0)
		b = be64(b, fs[i].Cookie)
		rec, err := appendRecord(b, &fs[i])
		if err != nil {
			b[4] = 1
			rec = append(b, fs[i].String()...)
		}
		b = rec
		binary.BigEndian.PutUint32(b, uint32(len(b)))
		h.Write(b)
	}
	var sum [16]byte
	copy(sum[:], h.Sum(nil))
	return sum
}
