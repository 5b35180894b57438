package firewall

// PortMask is one value/mask match on a 16-bit transport port; Mask 0xffff is
// an exact match.
type PortMask struct {
	Value uint16
	Mask  uint16
}

// PortRangeMasks covers [min, max] with the fewest value/mask pairs whose
// masks are prefixes (the minimal prefix cover, which is unique and is what
// the reference's port_rule_masking yields), in ascending order. min > max
// yields nil.
func PortRangeMasks(min, max uint16) []PortMask {
	if min > max {
		return nil
	}
	var out []PortMask
	lo, hi := uint32(min), uint32(max)
	for lo <= hi {
		// The largest aligned block starting at lo that stays within hi.
		size := uint32(1)
		for {
			next := size << 1
			if next > 1<<16 || lo&(next-1) != 0 || lo+next-1 > hi {
				break
			}
			size = next
		}
		out = append(out, PortMask{Value: uint16(lo), Mask: uint16(^(size - 1) & 0xffff)})
		lo += size
	}
	return out
}
