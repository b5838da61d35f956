package metal

import (
	"testing"

	"hybrid/devices"
)

// TestSaysWhyAbsent checks the backend is registered, opens no device and
// says why: until the real device exists, claiming one would be a lie.
func TestSaysWhyAbsent(t *testing.T) {
	devs, missing := devices.Discover(devices.Options{Threads: 1})
	for _, d := range devs {
		if d.Info().Kind == "metal" {
			t.Fatalf("%s (%s) is a metal device, but the backend is a stub", d.Name(), d.Info().Detail)
		}
		d.Close()
	}
	for _, m := range missing {
		if m.Kind == "metal" {
			if m.Why == "" {
				t.Fatal("no reason given")
			}
			t.Logf("metal: %s", m.Why)
			return
		}
	}
	t.Fatalf("no metal backend among the missing: %+v", missing)
}
