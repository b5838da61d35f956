package configs

import (
	"fmt"
	"strings"
)

// Error is a problem in a config file: which file, which line, what is
// wrong. Every error Decode returns is one, and formats use it for the
// checks they make after decoding (Errorf), so that a caller or a test can
// find the file and line with errors.As.
type Error struct {
	Path string
	Line int // 1-based; 0 for the file as a whole (too large, not a regular file)
	Msg  string
	// Issue is what the decoder found wrong; Invalid for a format's own
	// checks of decoded values.
	Issue Issue
}

// Error returns "path:line: msg", or "path: msg" for the whole file.
func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Path + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
}

// Errorf makes the Error of a check a format makes after decoding: a value
// of the right type that the format refuses, at the line a Node gives.
func Errorf(path string, line int, format string, args ...any) *Error {
	return &Error{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// An Issue is the kind of problem the decoder found.
type Issue int

const (
	Invalid        Issue = iota // not the decoder's: a decoded value the format refuses
	TooLarge                    // the file is over the format's size limit
	Syntax                      // the file is not YAML
	Empty                       // no document, or an empty one
	SecondDocument              // more than one document
	Alias                       // a YAML alias (*name)
	UnknownKey                  // a key the mapping does not have
	DuplicateKey                // a key given twice in one mapping
	WrongShape                  // a list, mapping or single value where another is wanted
	BadValue                    // a single value that is not of its field's type ("fast" for a number)
	NoValue                     // a key or list item given no value, where the format wants one
	NotRegular                  // the path is not a regular file (a directory, a FIFO, a device); Got says which
)

var issueNames = []string{"invalid", "too large", "syntax", "empty", "second document", "alias",
	"unknown key", "duplicate key", "wrong shape", "bad value", "no value", "not a regular file"}

func (i Issue) String() string {
	if i >= 0 && int(i) < len(issueNames) {
		return issueNames[i]
	}
	return fmt.Sprintf("issue(%d)", int(i))
}

// What a WrongShape or BadValue problem wants (Problem.Want).
const (
	WantFields  = "a mapping of keys to values" // a struct
	WantMapping = "a mapping"                   // a map
	WantList    = "a list"
	WantValue   = "a single value"
	WantNumber  = "a number"
	WantInteger = "a whole number"
	WantBool    = "a boolean (true or false)"
	WantFinite  = "a finite number" // a float field given .nan or .inf
)

// A Problem is what the decoder found wrong, before it is put into words.
// A Format's Words may word it in the format's own terms; otherwise the
// decoder words it ("unknown key "x" in devices[0] (known: ...)").
type Problem struct {
	Issue Issue
	// At is where: the keys and list positions ("[0]") from the top of the
	// document down to the value at fault, or, for UnknownKey and
	// DuplicateKey, down to the mapping that holds the key. Empty: the
	// document itself.
	At []string
	// Name is the value's name in the decoder's wording: its key, with the
	// list positions after it ("devices[0]", "unsupported[1]"), and a map's
	// key after the map's ("efficiency mat_mul"); "" for the document.
	Name  string
	Key   string   // UnknownKey, DuplicateKey: the key
	Known []string // UnknownKey, and WrongShape of a struct: its keys in field order, then Format.Extra
	First int      // DuplicateKey: the line the key was first given on
	Got   string   // WrongShape, BadValue, NoValue: the value: "a list", "a mapping", "empty", or itself quoted; NotRegular: what the path is ("a directory")
	Want  string   // WrongShape, BadValue: one of the Want constants
	Text  string   // Syntax: the YAML parser's message
}

// word puts p into the decoder's own words, naming the document as f.Name
// does.
func (f *Format) word(p Problem) string {
	name := p.Name
	if name == "" {
		name = "the " + f.Name
	}
	switch p.Issue {
	case TooLarge:
		return fmt.Sprintf("larger than %s, the most a %s may be", sizeText(f.limit()), f.Name)
	case Syntax:
		return p.Text
	case Empty:
		return "empty " + f.Name
	case SecondDocument:
		return "a second YAML document: a " + f.Name + " is one document"
	case Alias:
		return fmt.Sprintf("%s: YAML aliases are not supported in a %s; write the value out", name, f.Name)
	case UnknownKey:
		return fmt.Sprintf("unknown key %q in %s (known: %s)", p.Key, name, strings.Join(p.Known, ", "))
	case DuplicateKey:
		return fmt.Sprintf("key %q given twice in %s (first at line %d)", p.Key, name, p.First)
	case WrongShape:
		return fmt.Sprintf("%s must be %s", name, p.Want)
	case BadValue:
		return fmt.Sprintf("%s: %s is not %s", name, p.Got, p.Want)
	case NoValue:
		return fmt.Sprintf("%s has no value: give one or leave the key out", name)
	case NotRegular:
		return fmt.Sprintf("%s, not a regular file: a %s must be one", p.Got, f.Name)
	}
	return p.Issue.String()
}

// sizeText writes a byte count the way a limit is stated: "1 MiB".
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
