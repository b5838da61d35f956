// Package configs embeds the shipped policies (policies/*.yaml) and hardware
// profiles (hardware/*.yaml), so that the binary finds them from any
// directory; files on disk are read by path instead.
package configs

import "embed"

// FS holds policies/ and hardware/.
//
//go:embed policies hardware
var FS embed.FS
