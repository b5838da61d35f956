package verify

import (
	"testing"

	"hybrid/devices/cpu"
	"hybrid/devices/sim"
)

// TestAllocator holds the CPU device and a simulated one to the allocator
// contract.
func TestAllocator(t *testing.T) {
	a, b := cpu.New("cpu", 1), cpu.New("cpu:1", 1)
	defer a.Close()
	defer b.Close()
	if r := Allocator(a, b); r.Status != Pass {
		t.Fatalf("cpu: %s", r.Note)
	}
	hw, err := sim.LoadHardware("m4-pro")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sim.Open(hw, 1) {
		if r := Allocator(d, a); r.Status != Pass {
			t.Fatalf("%s: %s", d.Name(), r.Note)
		}
		d.Close()
	}
}
