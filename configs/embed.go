// Package configs embeds the shipped policies (policies/*.yaml) and hardware
// profiles (hardware/*.yaml), so that the binary finds them from any
// directory; files on disk are read by path instead.
//
// It also holds the one strict YAML decoder (Format.Decode) that reads
// every config format: policies, hardware profiles and measured cost
// profiles, each a *Error naming the file and line when it is malformed;
// and the one reader of their files (Format.ReadFile), which takes only a
// regular file within the format's size limit.
package configs

import "embed"

// FS holds policies/ and hardware/.
//
//go:embed policies hardware
var FS embed.FS
