package chat

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"hybrid/models/gguf"
)

// TestJinja2 renders small templates that exercise what chat templates use
// (Python string methods, slicing, namespace, loop controls, tests, tojson,
// whitespace control) and compares with Jinja2's output, made by
// testdata/jinja2_cases.py.
func TestJinja2(t *testing.T) {
	f, err := os.Open("testdata/jinja2_cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c [3]string
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		t.Run(c[0], func(t *testing.T) {
			tmpl, err := Parse(c[1])
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(nil, Options{Extra: map[string]any{"x": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if got != c[2] {
				t.Errorf("got  %q\nwant %q (Jinja2)", got, c[2])
			}
		})
	}
}

func TestStrftime(t *testing.T) {
	// Expected values from Python 3: datetime(...).strftime(format).
	summer := time.Date(2024, 7, 26, 12, 0, 0, 0, time.UTC)
	winter := time.Date(2025, 1, 5, 0, 7, 3, 0, time.UTC)
	cases := []struct {
		t         time.Time
		format    string
		want      string
		inTmplate bool
	}{
		{summer, "%d %b %Y", "26 Jul 2024", true},
		{summer, "%B %d, %Y", "July 26, 2024", true},
		{summer, "%Y-%m-%d %H:%M:%S", "2024-07-26 12:00:00", false},
		{summer, "%a %A %j %I%p %y %-d/%-m", "Fri Friday 208 12PM 24 26/7", false},
		{summer, "%c", "Fri Jul 26 12:00:00 2024", false},
		{summer, "%e|%U|%W|%V|%G|%u|%w|%%|%Q", "26|29|30|30|2024|5|5|%|%Q", false},
		{winter, "%d %b %Y", "05 Jan 2025", false},
		{winter, "%c", "Sun Jan  5 00:07:03 2025", false},
		{winter, "%e|%U|%W|%V|%G|%u|%w|%I %p|%j", " 5|01|00|01|2025|7|0|12 AM|005", false},
	}
	for _, c := range cases {
		if got := Strftime(c.t, c.format); got != c.want {
			t.Errorf("Strftime(%v, %q) = %q, want %q", c.t, c.format, got, c.want)
		}
	}
	tmpl, err := Parse(`{{ strftime_now("%d %b %Y") }}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(nil, Options{Now: func() time.Time { return summer }})
	if err != nil || got != "26 Jul 2024" {
		t.Errorf("strftime_now in a template: %q, %v", got, err)
	}
}

func TestRaiseException(t *testing.T) {
	tmpl, err := Parse("{% if messages[0].role != 'user' %}{{ raise_exception('Roles must alternate!') }}{% endif %}ok")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]Message{{"assistant", "x"}}, Options{})
	var re *RaiseError
	if !errors.As(err, &re) || re.Message != "Roles must alternate!" {
		t.Fatalf("err = %v, want a RaiseError with the template's message", err)
	}
	if got, err := tmpl.Render([]Message{{"user", "x"}}, Options{}); err != nil || got != "ok" {
		t.Errorf("Render = %q, %v", got, err)
	}
}

// TestErrors checks that bad templates fail with a message that says where
// or why, and that the limits hold.
func TestErrors(t *testing.T) {
	cases := []struct {
		name, src string
		parse     bool   // the error comes from Parse
		want      string // in the error
	}{
		{"unclosed tag", "hello\n{% if x %}\nno end", true, "line: 3"},
		{"bad expression", "{{ 1 + }}", true, "line: 1"},
		{"too large", strings.Repeat("a", MaxTemplateSize+1), true, "over the size limit"},
		{"too deep", strings.Repeat("(", MaxNesting+1), true, "nests"},
		{"include", `{% include "chat_template" %}`, true, "not allowed"},
		{"import", `{% import "x" as y %}`, true, "not allowed"},
		{"extends", `{% extends "x" %}`, true, "not allowed"},
		{"undefined function", "line one\n{{ nope() }}", false, "line 2"},
		{"unknown method", "{{ 'a'.nope() }}", false, "nope"},
		{"huge range", "{% for i in range(1000000000) %}{% endfor %}", false, "more than"},
		{"recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", false, "recursion deeper"},
		{"self-referencing tojson", "{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}{{ ns | tojson }}", false, "tojson"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Parse(c.src)
			if !c.parse {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				_, err = tmpl.Render([]Message{{"user", "hi"}}, Options{})
			}
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.want)) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			if len(err.Error()) > 2000 {
				t.Errorf("error of %d bytes: should not quote the template", len(err.Error()))
			}
		})
	}
}

func TestLimitWriter(t *testing.T) {
	w := &limitWriter{max: 10, deadline: time.Now().Add(time.Hour)}
	if _, err := w.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("past the limit: %v", err)
	}
	w = &limitWriter{max: 10, deadline: time.Now().Add(-time.Second)}
	if _, err := w.Write([]byte("x")); err == nil || !strings.Contains(err.Error(), "took more than") {
		t.Errorf("past the deadline: %v", err)
	}
}

// TestSystemFold checks llama.cpp's workaround for templates without a
// system role, and that templates with one are left alone.
func TestSystemFold(t *testing.T) {
	noSys, _ := Parse("{% if messages and messages[0].role == 'system' %}{{ raise_exception('no system') }}{% endif %}" +
		"{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}")
	if noSys.SupportsSystemRole() {
		t.Error("SupportsSystemRole = true for a template that raises on it")
	}
	got, err := noSys.Render([]Message{{"system", "S"}, {"user", "U"}}, Options{})
	if err != nil || got != "[user:S\nU]" {
		t.Errorf("folded: %q, %v", got, err)
	}
	got, err = noSys.Render([]Message{{"system", "S"}}, Options{})
	if err != nil || got != "" {
		t.Errorf("lone system message: %q, %v", got, err)
	}
	chatml, _ := Parse(ChatML)
	if !chatml.SupportsSystemRole() {
		t.Error("SupportsSystemRole = false for ChatML")
	}
}

type fakeMetadata map[string]any

func (m fakeMetadata) GetString(key string) (string, error) {
	v, ok := m[key]
	if !ok {
		return "", &gguf.KeyError{Key: key}
	}
	s, ok := v.(string)
	if !ok {
		return "", &gguf.KeyError{Key: key, Want: "string", Got: "uint32"}
	}
	return s, nil
}

func TestFromGGUF(t *testing.T) {
	msgs := []Message{{"user", "Hi"}}
	opts := Options{AddGenerationPrompt: true}
	const chatmlOut = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	for _, c := range []struct {
		name      string
		md        fakeMetadata
		isDefault bool
		want      string
		err       string
	}{
		{"missing", fakeMetadata{}, true, chatmlOut, ""},
		{"empty", fakeMetadata{MetadataKey: ""}, true, chatmlOut, ""},
		{"chatml by name", fakeMetadata{MetadataKey: "chatml"}, true, chatmlOut, ""},
		{"own", fakeMetadata{MetadataKey: "{{ messages[0].content }}!"}, false, "Hi!", ""},
		{"wrong type", fakeMetadata{MetadataKey: uint32(3)}, false, "", "is uint32"},
		{"bad template", fakeMetadata{MetadataKey: "{% for %}"}, false, "", MetadataKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmpl, isDefault, err := FromGGUF(c.md)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || isDefault != c.isDefault {
				t.Fatalf("FromGGUF: isDefault %v, err %v", isDefault, err)
			}
			if got, err := tmpl.Render(msgs, opts); err != nil || got != c.want {
				t.Errorf("Render = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestConcurrentRender(t *testing.T) {
	tmpl, err := Parse(ChatML)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := []Message{{"user", strings.Repeat("x", i)}}
			want := "<|im_start|>user\n" + strings.Repeat("x", i) + "<|im_end|>\n"
			if got, err := tmpl.Render(msgs, Options{}); err != nil || got != want {
				t.Errorf("Render = %q, %v", got, err)
			}
		}()
	}
	wg.Wait()
}

// FuzzRender feeds arbitrary templates to Parse and Render: errors are fine,
// panics and hangs are not.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		ChatML,
		"{% for m in messages %}{{ m.content[::-1] | tojson }}{% endfor %}",
		"{{ raise_exception(1) }}", "{{ strftime_now() }}", "{{ strftime_now(1, 2) }}",
		"{{ range(1, 2, 0) }}", "{{ 'a'.split('') }}", "{{ 'a'.replace() }}", "{{ 'a'.startswith(1) }}",
		"{% set x = namespace() %}{{ x.y.z }}", "{{ messages[10].content }}", "{{ 1 / 0 }}",
		"{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}x{% endcall %}",
		"{{ {}|tojson(indent='x') }}", "{{ none.strip() }}", "{% for %}", "{{ -1 * 'a' }}",
		"{% filter upper %}x{% endfilter %}", "{{ [1,2][1:0:-1] }}", "{% raw %}{{{% endraw %}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if strings.Contains(src, "*") {
			t.Skip("string repetition can allocate without bound (documented)")
		}
		tmpl, err := Parse(src)
		if err != nil {
			return
		}
		_, _ = tmpl.Render([]Message{{"system", "s"}, {"user", "u"}}, Options{BOSToken: "<s>"})
	})
}
