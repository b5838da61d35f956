package mtl

import (
	"testing"
	"time"
)

// TestPageSpan checks the page rounding of no-copy buffers: the span starts
// on a page, is whole pages, covers every byte, and the offset finds the
// data in it.
func TestPageSpan(t *testing.T) {
	const page = 16384
	cases := []struct {
		name                  string
		addr, n               uintptr
		start, length, offset uintptr
	}{
		{"aligned whole page", 0x10000, page, 0x10000, page, 0},
		{"aligned partial", 0x10000, 100, 0x10000, page, 0},
		{"inside one page", 0x10010, 100, 0x10000, page, 0x10},
		{"across a boundary", 0x13ff0, 0x20, 0x10000, 2 * page, 0x3ff0},
		{"ends on a boundary", 0x10010, page - 0x10, 0x10000, page, 0x10},
		{"many pages", 0x2345678, 10 * page, 0x2344000, 11 * page, 0x1678},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start, length, off := PageSpan(c.addr, c.n, page)
			if start != c.start || length != c.length || off != c.offset {
				t.Fatalf("PageSpan(%#x, %d) = %#x, %d, %#x; want %#x, %d, %#x", c.addr, c.n, start, length, off, c.start, c.length, c.offset)
			}
			if start%page != 0 || length%page != 0 || start+off != c.addr || start+length < c.addr+c.n {
				t.Fatalf("span %#x+%d does not cover %#x+%d on pages", start, length, c.addr, c.n)
			}
		})
	}
}

func TestSz(t *testing.T) {
	s, err := Sz([3]int{4, 2, 3})
	if err != nil || s != (Size{4, 2, 3}) || s.Count() != 24 {
		t.Fatalf("Sz = %v, %v", s, err)
	}
	for _, bad := range [][3]int{{0, 1, 1}, {1, -1, 1}, {1, 1, 0}} {
		if _, err := Sz(bad); err == nil {
			t.Fatalf("Sz(%v) accepted an empty dimension", bad)
		}
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[CommandBufferStatus]string{StatusCompleted: "completed", StatusError: "error", StatusNotEnqueued: "not enqueued", 9: "status(9)"} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q, want %q", uint64(s), got, want)
		}
	}
}

func TestGPUDuration(t *testing.T) {
	if d := GPUDuration(100.25, 100.5); d != 250*time.Millisecond {
		t.Fatalf("GPUDuration = %v", d)
	}
	for _, c := range [][2]float64{{0, 1}, {2, 1}, {1, 1}} {
		if d := GPUDuration(c[0], c[1]); d != 0 {
			t.Fatalf("GPUDuration(%v) = %v, want 0 for missing or reversed timestamps", c, d)
		}
	}
}
