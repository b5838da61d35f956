package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"hybrid/models/gguf"
	"hybrid/models/tokenizer"
)

// tokenizeCmd prints the tokens of a text as llama.cpp's llama-tokenize
// does by default: with the BOS the model adds (llama-tokenize passes the
// model's add_bos_token as add_special, so an EOS comes only with a BOS)
// and special-token texts parsed, one "id -> 'piece'" line a token with
// control tokens shown by their text. Unlike llama-tokenize it does not
// process escapes such as \n in --prompt: the text is taken as it is.
func tokenizeCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", stderr)
	model := fs.String("model", "", "GGUF `file` whose tokenizer to use; a vocabulary-only file is enough")
	prompt := fs.String("prompt", "", "the `text` to tokenize")
	file := fs.String("file", "", "read the text from this `file` (- for standard input) instead of --prompt: a regular file of at most 16 MiB of UTF-8")
	asJSON := fs.Bool("json", false, `print {"tokens": [ids...]} instead of a line a token`)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return badFlag(fs, "--model is required")
	}
	switch {
	case isSet(fs, "prompt") && isSet(fs, "file"):
		return badFlag(fs, "--prompt and --file both give the text: use one")
	case !isSet(fs, "prompt") && !isSet(fs, "file"):
		return badFlag(fs, "give the text with --prompt or --file")
	case isSet(fs, "file") && *file == "":
		return badFlag(fs, "--file needs a file name (- for standard input)")
	}
	text := *prompt
	if *file != "" {
		var err error
		if text, err = readPrompt(*file); err != nil {
			return err
		}
	}
	tok, err := loadTokenizer(*model)
	if err != nil {
		return err
	}
	ids := tok.Encode(text, tok.AddsBOS())

	w := bufio.NewWriter(stdout)
	if *asJSON {
		b := []byte(`{"tokens": [`)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		b = append(b, "]}\n"...)
		w.Write(b)
	} else {
		for _, id := range ids {
			// llama-tokenize's "%6d -> '%s'\n", the piece's bytes as
			// they are, even when they are not whole UTF-8.
			fmt.Fprintf(w, "%6d -> '", id)
			w.Write(tok.PieceSpecial(id))
			w.WriteString("'\n")
		}
	}
	return w.Flush()
}

// loadTokenizer reads the tokenizer of the GGUF file at path: its metadata
// only, so a vocabulary-only file works and a model's weights are never
// read.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err // gguf's error names the file
	}
	defer f.Close()
	return tokenizer.FromGGUF(f) // its errors name the file
}
