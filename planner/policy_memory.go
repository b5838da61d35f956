package planner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"hybrid/devices"
)

var polSizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$`)

// ParseSize parses a byte count: "8GiB", "512MiB", "1.5GB" (decimal units
// are powers of 1000, binary ones of 1024) or a plain number of bytes.
func ParseSize(s string) (int64, error) {
	m := polSizeRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("size %q is not a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	n := v * mult
	if n < 1 || n > 1<<50 {
		return 0, fmt.Errorf("size %q is out of range (1 byte to 1 PiB)", s)
	}
	return int64(n), nil
}

// MemoryCap is the byte cap for d: the smallest cap whose reference Matches
// it, or 0 for none.
func (p *Policy) MemoryCap(d devices.Info) int64 {
	c, _ := p.memoryCap(d)
	return c
}

// CapLine is the line of the cap MemoryCap returns for d (0: none), for
// errors that blame it.
func (p *Policy) CapLine(d devices.Info) int {
	_, line := p.memoryCap(d)
	return line
}

func (p *Policy) memoryCap(d devices.Info) (int64, int) {
	var c int64
	line := 0
	for r, n := range p.Memory {
		if !Matches(r, d) {
			continue
		}
		// Ties go to the earlier line, so that the answer does not depend on
		// map order.
		if l := p.lines.memory[r]; c == 0 || n < c || (n == c && l < line) {
			c, line = n, l
		}
	}
	return c, line
}
