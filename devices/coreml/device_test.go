//go:build !darwin

package coreml

import (
	"strings"
	"testing"

	"hybrid/devices"
)

// TestSaysWhyAbsent checks that off darwin the backend is registered, opens
// no device and says why.
func TestSaysWhyAbsent(t *testing.T) {
	devs, missing := devices.Discover(devices.Options{Threads: 1})
	for _, d := range devs {
		if d.Info().Kind == "coreml" {
			t.Fatalf("%s (%s) is a coreml device off darwin", d.Name(), d.Info().Detail)
		}
		d.Close()
	}
	for _, m := range missing {
		if m.Kind == "coreml" {
			if !strings.HasPrefix(m.Why, "not darwin: ") {
				t.Fatalf("coreml is missing for %q, want a reason starting \"not darwin: \"", m.Why)
			}
			t.Logf("coreml: %s", m.Why)
			return
		}
	}
	t.Fatalf("no coreml backend among the missing: %+v", missing)
}
