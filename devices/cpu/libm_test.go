package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// libmProgram prints, for a fixed pseudo-random set of arguments of the
// ranges llama.cpp uses (softmax exponents in [-30, 0], rope angles up to
// 8192, negative ones, small ones), the bits of x, expf(x), sinf(x), cosf(x)
// from the C library.
const libmProgram = `
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
int main(void) {
	uint32_t s = 12345;
	for (int i = 0; i < 300000; i++) {
		s = s * 1664525u + 1013904223u;
		float u = (s >> 8) / (float)(1 << 24), x;
		switch (i % 4) {
		case 0: x = -30.0f * u; break;
		case 1: x = u * u * 8192.0f; break;
		case 2: x = -u * 200.0f; break;
		default: x = u * 0.8f; break;
		}
		float sn, cs;
		sincosf(x, &sn, &cs);
		printf("%08x %08x %08x %08x\n", bits(x), bits(expf(x)), bits(sn), bits(cs));
	}
	return 0;
}
`

// TestExpfSincosfMatchLibm checks expf and sincosf bit for bit against the C
// library that llama.cpp links (glibc on Linux). It needs a C compiler: in CI
// one is required; elsewhere the test skips without one.
func TestExpfSincosfMatchLibm(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no C compiler (cc) to check expf and sincosf against the C library")
		}
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "libm.c")
	if err := os.WriteFile(src, []byte(libmProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "libm")
	if out, err := exec.Command(cc, "-O2", "-o", bin, src, "-lm").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	n, bad := 0, 0
	for sc.Scan() {
		var xb, eb, sb, cb uint32
		if _, err := fmt.Sscanf(sc.Text(), "%x %x %x %x", &xb, &eb, &sb, &cb); err != nil {
			t.Fatal(err)
		}
		x := math.Float32frombits(xb)
		s, c := sincosf(x)
		if e := expf(x); math.Float32bits(e) != eb {
			bad++
			if bad < 5 {
				t.Errorf("expf(%g) = %g, libm %g", x, e, math.Float32frombits(eb))
			}
		}
		if math.Float32bits(s) != sb || math.Float32bits(c) != cb {
			bad++
			if bad < 5 {
				t.Errorf("sincosf(%g) = %g, %g; libm %g, %g", x, s, c, math.Float32frombits(sb), math.Float32frombits(cb))
			}
		}
		n++
	}
	if n != 300000 {
		t.Fatalf("read %d results", n)
	}
	if bad > 0 {
		t.Fatalf("%d of %d differ", bad, n)
	}
}
