//go:build !(linux || darwin)

package gguf

import (
	"fmt"
	"os"
)

// Open reads the GGUF file at path and parses it. On this platform the file
// is read into memory whole; on Linux and macOS it is memory-mapped instead.
func Open(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return Parse(data, path)
}
