package gguf

import (
	"errors"
	"strconv"
	"unicode"
)

// Errors a caller may test for with errors.Is; a *ParseError wraps them.
var (
	// ErrTruncated means a field runs past the end of the file.
	ErrTruncated = errors.New("unexpected end of file")
	// ErrBadMagic means the file does not start with "GGUF".
	ErrBadMagic = errors.New("not a GGUF file")
	// ErrUnsupportedVersion means a GGUF version other than 2 or 3, or a
	// big-endian file.
	ErrUnsupportedVersion = errors.New("unsupported GGUF version")
	// ErrMissingKey means a metadata key is absent (see KeyError).
	ErrMissingKey = errors.New("metadata key is missing")
)

// ParseError reports a malformed file: which field is at fault and where.
type ParseError struct {
	Path string // the file, as given to Open or Parse
	// Field names the field in the spec's terms, with indices:
	// "version", "kv[4].value[17]", "tensor_info[3].type".
	Field string
	// Name is the metadata key or tensor name the field belongs to, when
	// it has been read.
	Name   string
	Offset int64 // byte offset of the field in the file
	Err    error
}

// Error reads like
// "gguf: model.gguf: tensor_info[3].type (blk.0.attn_q.weight) at byte 1234: unknown tensor type 99".
func (e *ParseError) Error() string {
	s := "gguf: "
	if e.Path != "" {
		s += e.Path + ": "
	}
	s += e.Field
	if e.Name != "" {
		s += " (" + printable(e.Name) + ")"
	}
	return s + " at byte " + strconv.FormatInt(e.Offset, 10) + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// printable returns s as is when it is short printable text, else quoted and
// cut, so that a hostile key cannot garble a message.
func printable(s string) string {
	const max = 96
	plain := len(s) <= max
	for _, r := range s {
		if !plain {
			break
		}
		plain = r != '"' && r < unicode.MaxASCII && unicode.IsPrint(r) && r != ' '
	}
	if plain {
		return s
	}
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// KeyError reports a metadata key that is missing or holds the wrong type.
// A missing key's KeyError wraps ErrMissingKey.
type KeyError struct {
	Path string
	Key  string
	Want string // what the accessor wanted: "string", "an unsigned integer"...
	Got  string // the value's type; empty when the key is missing
	Msg  string // more detail, when a type alone does not explain it
}

// Error reads like "gguf: model.gguf: metadata key llama.block_count is float32, want an unsigned integer".
func (e *KeyError) Error() string {
	s := "gguf: "
	if e.Path != "" {
		s += e.Path + ": "
	}
	s += "metadata key " + printable(e.Key)
	switch {
	case e.Got == "":
		s += " is missing"
	case e.Msg != "":
		s += " " + e.Msg
	default:
		s += " is " + e.Got + ", want " + e.Want
	}
	return s
}

// Unwrap returns ErrMissingKey for a missing key.
func (e *KeyError) Unwrap() error {
	if e.Got == "" {
		return ErrMissingKey
	}
	return nil
}
