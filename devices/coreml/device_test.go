package coreml

import (
	"testing"

	"hybrid/devices"
)

// TestSaysWhyAbsent checks the backend is registered, opens no device and
// says why: until the real device exists, claiming one would be a lie.
func TestSaysWhyAbsent(t *testing.T) {
	devs, missing := devices.Discover(devices.Options{Threads: 1})
	for _, d := range devs {
		if d.Info().Kind == "coreml" {
			t.Fatalf("%s (%s) is a coreml device, but the backend is a stub", d.Name(), d.Info().Detail)
		}
		d.Close()
	}
	for _, m := range missing {
		if m.Kind == "coreml" {
			if m.Why == "" {
				t.Fatal("no reason given")
			}
			t.Logf("coreml: %s", m.Why)
			return
		}
	}
	t.Fatalf("no coreml backend among the missing: %+v", missing)
}
