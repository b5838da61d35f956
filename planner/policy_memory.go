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

// AutoMargin is what a cap of `memory: auto` leaves free on a device: a
// fixed 1 GiB, the margin llama.cpp's --fit keeps on every device by
// default (--fit-target 1024 MiB, tools/fit-params), for what a plan does
// not count: the CUDA context and its modules where the free memory is not
// known and the device's whole memory is taken instead (about half a GiB on
// an H100; an estimate), the buffers of a prefill step of up to 512 tokens,
// larger than the decode step's the plan counts (about 0.1 GiB for
// Llama-7B, 0.3 GiB for a 70B shape), the CUDA device's cuBLAS scratch
// where cuBLAS loads (a 32 MiB workspace, and at most 96 MiB of a prompt's
// weight rows decoded to f16), and the allocator's rounding. None
// of these grows with the device's memory, so it is not a share of it.
const AutoMargin int64 = 1 << 30

// AutoCap is the cap `memory: auto` gives d: its free memory when it was
// opened (Info.Free, or Info.Memory where that is 0, unknown) less
// AutoMargin. ok is false where d has no fixed memory (the host CPU) or the
// margin leaves nothing; capProblem says which.
func AutoCap(d devices.Info) (c int64, ok bool) {
	avail := autoAvail(d)
	if avail <= AutoMargin {
		return 0, false
	}
	return avail - AutoMargin, true
}

// autoAvail is the memory auto takes from: Free, else Memory.
func autoAvail(d devices.Info) int64 {
	if d.Free > 0 {
		return d.Free
	}
	return d.Memory
}

// autoWhat says how an auto cap of d was reached, for notes and errors:
// "free 78.2 GiB less a margin of 1 GiB".
func autoWhat(d devices.Info) string {
	src := "free"
	if d.Free <= 0 {
		src = "memory"
	}
	return fmt.Sprintf("%s %s less a margin of %s", src, bytesStr(autoAvail(d)), bytesStr(AutoMargin))
}

// capProblem is what is wrong with the auto caps that match d, or "": a
// device with no fixed memory size, or too little free memory for the
// margin. Check and Make report it for the devices the policy allows.
func (p *Policy) capProblem(d devices.Info) (msg string, line int) {
	// Of several auto caps on d, the one earliest in the file.
	for r := range p.MemoryAuto {
		l := p.lines.memory[r]
		if !Matches(r, d) || (msg != "" && l >= line) {
			continue
		}
		switch {
		case autoAvail(d) <= 0:
			msg, line = fmt.Sprintf("memory: %s: auto for %s, which has no fixed memory size (host memory): give a size, like 16GiB", r, d.Name), l
		case autoAvail(d) <= AutoMargin:
			msg, line = fmt.Sprintf("memory: %s: auto for %s leaves nothing: its %s (the CUDA context, a prefill step's buffers); free memory on the device or give a size", r, d.Name, autoWhat(d)), l
		}
	}
	return msg, line
}

// MemoryCap is the byte cap for d: the smallest cap whose reference Matches
// it (an auto cap being AutoCap's), or 0 for none. An auto cap that
// capProblem refuses is left out; Check and Make report it.
func (p *Policy) MemoryCap(d devices.Info) int64 {
	c, _, _ := p.memoryCap(d)
	return c
}

// CapLine is the line of the cap MemoryCap returns for d (0: none), for
// errors that blame it.
func (p *Policy) CapLine(d devices.Info) int {
	_, line, _ := p.memoryCap(d)
	return line
}

// memoryCap is MemoryCap, its line, and whether it is an auto cap.
func (p *Policy) memoryCap(d devices.Info) (int64, int, bool) {
	var c int64
	line, auto := 0, false
	take := func(r string, n int64, isAuto bool) {
		// Ties go to the earlier line, so that the answer does not depend on
		// map order.
		if l := p.lines.memory[r]; c == 0 || n < c || (n == c && l < line) {
			c, line, auto = n, l, isAuto
		}
	}
	for r, n := range p.Memory {
		if Matches(r, d) {
			take(r, n, false)
		}
	}
	for r := range p.MemoryAuto {
		if Matches(r, d) {
			if n, ok := AutoCap(d); ok {
				take(r, n, true)
			}
		}
	}
	return c, line, auto
}
