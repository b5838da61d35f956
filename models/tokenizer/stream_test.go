package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStream(t *testing.T) {
	tok := mustNew(t, helloVocab())
	hello, world := tok.ids["▁hello"], tok.ids["▁world"]
	smile := []int32{byteID(0xF0), byteID(0x9F), byteID(0x99), byteID(0x82)} // 🙂
	tests := []struct {
		name    string
		atStart bool
		ids     []int32
		want    []string // what each Add returns
		flush   string
	}{
		{"start", true, []int32{1, hello, world}, []string{"", "hello", " world"}, ""},
		{"continuation", false, []int32{hello, world}, []string{" hello", " world"}, ""},
		{"split character", false, append([]int32{hello}, smile...), []string{" hello", "", "", "", "🙂"}, ""},
		{"invalid byte", false, []int32{byteID(0xFF), hello}, []string{"\uFFFD", " hello"}, ""},
		{"broken sequence", false, []int32{byteID(0xE6), hello}, []string{"", "\uFFFD hello"}, ""},
		{"unfinished at end", false, []int32{hello, byteID(0xE6), byteID(0x97)}, []string{" hello", "", ""}, "\uFFFD\uFFFD"},
		{"strip after control", false, []int32{hello, 2, world}, []string{" hello", "", "world"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tok.NewStream(tt.atStart)
			for i, id := range tt.ids {
				if got := s.Add(id); got != tt.want[i] {
					t.Errorf("Add #%d (%d) = %q, want %q", i, id, got, tt.want[i])
				}
			}
			if got := s.Flush(); got != tt.flush {
				t.Errorf("Flush() = %q, want %q", got, tt.flush)
			}
			if got := s.Flush(); got != "" {
				t.Errorf("second Flush() = %q, want \"\"", got)
			}
		})
	}
}

// TestStreamMatchesDecode checks on random text that a Stream's output,
// put together, is Decode's, and that every piece of it is valid UTF-8.
func TestStreamMatchesDecode(t *testing.T) {
	tok := mustNew(t, helloVocab())
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1000 {
		text := randomText(rng)
		ids := tok.Encode(text, rng.IntN(2) == 0)
		s := tok.NewStream(true)
		var sb strings.Builder
		for _, id := range ids {
			out := s.Add(id)
			if !utf8.ValidString(out) {
				t.Fatalf("text %q: Add(%d) = %q, not valid UTF-8", text, id, out)
			}
			sb.WriteString(out)
		}
		sb.WriteString(s.Flush())
		if got := sb.String(); got != tok.Decode(ids) || got != text {
			t.Fatalf("streamed %q, Decode %q, text %q", got, tok.Decode(ids), text)
		}
	}
}

// FuzzRoundTrip checks that Decode undoes Encode and that a Stream agrees
// with Decode, on any valid UTF-8 text without special-token texts or "▁"
// in it. Invalid UTF-8 need not round-trip: like llama.cpp, Encode cuts it
// into characters by their first byte alone, which can take in part of
// the next escaped space; the Stream must still return valid UTF-8.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", " ", "hello world", "  two\n\nlines ", "日本🙂", "\xff\xe6x", "héllo  wörld"} {
		f.Add(s)
	}
	tok, err := New(helloVocab())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if strings.Contains(text, "<s>") || strings.Contains(text, "</s>") || strings.Contains(text, "<unk>") || strings.Contains(text, spaceEscape) {
			t.Skip()
		}
		ids := tok.Encode(text, true)
		valid := utf8.ValidString(text)
		if got := tok.Decode(ids); valid && got != text {
			t.Fatalf("Decode(Encode(%q)) = %q", text, got)
		}
		s := tok.NewStream(true)
		var sb strings.Builder
		for _, id := range ids {
			sb.WriteString(s.Add(id))
		}
		sb.WriteString(s.Flush())
		if got := sb.String(); !utf8.ValidString(got) || (valid && got != text) {
			t.Fatalf("streamed %q for %q", got, text)
		}
	})
}
