// Package builtin embeds the default model, stories260K.gguf (see LICENSE.md),
// so that a fresh build of hybrid runs with no model file at hand.
package builtin

import _ "embed"

// Name is how the built-in model is named in output and errors.
const Name = "builtin:stories260K.gguf"

//go:embed stories260K.gguf
var model []byte

// Model returns the embedded GGUF file's bytes. Callers must not modify them.
func Model() []byte { return model }
