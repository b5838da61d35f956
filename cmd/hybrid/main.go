// Command hybrid runs Llama-family GGUF models on the devices of this machine.
//
//	hybrid run    [--model FILE] [--prompt TEXT] [-n N] [--temp T] ... generate text
//	hybrid synth  --preset NAME --type TYPE [--seed S] -o FILE      write a synthetic model
//	hybrid tokenize --model FILE (--prompt TEXT | --file PATH) [--json]  print a text's tokens
//
// Run "hybrid CMD -h" for a command's flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	// Device backends register themselves.
	_ "hybrid/devices/coreml"
	_ "hybrid/devices/cpu"
	_ "hybrid/devices/cuda"
	_ "hybrid/devices/metal"
)

type command struct {
	name, usage string
	run         func(args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"run", "generate text from a prompt", runCmd},
	{"devices", "list this machine's devices, and why any kind is missing", devicesCmd},
	{"plan", "print the per-op placement a policy gives", planCmd},
	{"profile", "measure op and copy costs on this machine's devices", profileCmd},
	{"bench", "measure prefill and decode speed (llama-bench style)", benchCmd},
	{"membw", "measure this machine's memory read bandwidth (the ceiling of decode)", membwCmd},
	{"synth", "write a synthetic model of a real shape with random weights", synthCmd},
	{"verify", "check a device's ops and generation against the CPU device", verifyCmd},
	{"tokenize", "print the tokens of a text (llama-tokenize style)", tokenizeCmd},
	{"serve", "serve the OpenAI API (chat and completions) over HTTP", serveCmd},
	{"chat", "chat with a model in the terminal, through its chat template", chatCmd},
}

func main() {
	exitOnInterrupt()
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the CLI and returns the process exit code: 0 on success, 1 on any
// error (printed as one line), 2 on a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			default:
				fmt.Fprintf(stderr, "hybrid %s: %v\n", c.name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "hybrid: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: hybrid COMMAND [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nRun 'hybrid COMMAND -h' for a command's flags.")
}

// newFlags returns a flag set that reports errors as usage errors (exit 2).
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("hybrid "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args and maps flag errors to errUsage; stray arguments are an
// error too.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return errUsage
	}
	return nil
}
