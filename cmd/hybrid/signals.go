package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"hybrid/internal/atomicfile"
)

// exitOnInterrupt makes SIGINT and SIGTERM remove the temporary files of
// outputs being written (a synthetic model's can be gigabytes) before the
// process exits, with the shell's code for death by that signal: 128 plus
// its number, 130 and 143. main installs it; Main does not, so tests that
// call Main keep the default handling.
func exitOnInterrupt() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-c
		msg := "hybrid: interrupted"
		if atomicfile.Cleanup() > 0 {
			msg += "; removed the partial output"
		}
		// A progress bar may be mid-line on a terminal.
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			msg = "\n" + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		code := 130
		if s == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
}
