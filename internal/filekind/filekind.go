// Package filekind names what a file that is not a regular one is, for the
// errors of every reader and writer that accepts regular files only (config
// files, prompt files, model files, atomically written outputs).
package filekind

import "io/fs"

// Of says what a file of mode m is when it is not a regular file: "a
// directory", "a named pipe (FIFO)", "a character device", ...
func Of(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "an irregular file (" + m.Type().String() + ")"
}
