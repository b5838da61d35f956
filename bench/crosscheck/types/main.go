// Command types prints a GGUF file's general.file_type and then one line per
// tensor: its name and type, in file order. With -hash it adds a digest of
// each tensor's data, so that two files can be compared tensor by tensor.
//
// Usage:
//
//	go run ./bench/crosscheck/types [-hash] FILE.gguf
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"

	"hybrid/models/gguf"
)

func main() {
	hash := flag.Bool("hash", false, "add a SHA-256 prefix of each tensor's data")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: types [-hash] FILE.gguf")
		os.Exit(2)
	}
	f, err := gguf.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "types:", err)
		os.Exit(1)
	}
	defer f.Close()
	ft := "?"
	if v, err := f.GetUint("general.file_type"); err == nil {
		ft = fmt.Sprint(v)
	}
	if *hash {
		fmt.Printf("general.file_type\t%s\t-\n", ft)
	} else {
		fmt.Printf("general.file_type\t%s\n", ft)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if *hash {
			sum := sha256.Sum256(f.TensorData(ti))
			fmt.Printf("%s\t%v\t%x\n", ti.Name, ti.Type, sum[:8])
		} else {
			fmt.Printf("%s\t%v\n", ti.Name, ti.Type)
		}
	}
}
