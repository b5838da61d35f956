// Package tokenizer implements the tokenizers of GGUF files, encoding text
// exactly as llama.cpp does (src/llama-vocab.cpp) and decoding token ids
// back to text, including a streaming decoder that emits only complete
// UTF-8: the Llama SentencePiece (SPM) tokenizer of files whose
// tokenizer.ggml.model is "llama" (llm_tokenizer_spm), and the byte-level
// BPE tokenizer of "gpt2" files (llm_tokenizer_bpe: Llama 3, Qwen2, GPT-2,
// DeepSeek and others, told apart by tokenizer.ggml.pre).
//
// FromGGUF builds a Tokenizer from a GGUF file; other callers copy the tokenizer.ggml.*
// metadata into a Vocab (start from NewVocab or NewVocabPre, which hold llama.cpp's
// defaults for keys a file leaves out) and passes it to New.
package tokenizer

import (
	"fmt"
	"sort"
	"strings"
)

// Token types, as stored in tokenizer.ggml.token_type.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Vocab is the tokenizer metadata of a GGUF file. Token ids are indices into
// Tokens; an id field is -1 where the model has no such token.
type Vocab struct {
	Model string // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
	// Pre is tokenizer.ggml.pre, the pre-tokenizer of a "gpt2" vocabulary
	// ("llama-bpe", "qwen2", ...; PreTokenizers lists them); "", the key
	// missing, is llama.cpp's "default". "llama" uses it only, as
	// llama.cpp does, to choose the strip attributes of special tokens.
	Pre    string
	Tokens []string  // tokenizer.ggml.tokens
	Scores []float32 // tokenizer.ggml.scores; nil means all zero; "gpt2" ignores them
	Types  []int32   // tokenizer.ggml.token_type; nil means all TypeNormal
	// Merges is tokenizer.ggml.merges, the BPE merges of a "gpt2"
	// vocabulary, "left right", the first applied first.
	Merges []string

	BOS int32 // tokenizer.ggml.bos_token_id
	EOS int32 // tokenizer.ggml.eos_token_id
	UNK int32 // tokenizer.ggml.unknown_token_id
	PAD int32 // tokenizer.ggml.padding_token_id
	// EOT is tokenizer.ggml.eot_token_id. When -1, New looks for a token
	// with one of the texts llama.cpp recognises as end-of-turn
	// ("<|eot_id|>", "<|im_end|>", "<end_of_turn>", ...), and of several
	// takes the one llama.cpp takes.
	EOT int32

	// EOM and FIMPre..FIMSep are tokenizer.ggml.eom_token_id and
	// tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id, -1 where the
	// file has none: like EOT, New then looks for a token with one of the
	// texts llama.cpp recognises.
	EOM                                            int32
	FIMPre, FIMSuf, FIMMid, FIMPad, FIMRep, FIMSep int32

	// Name and Architecture are general.name and general.architecture,
	// by which (with Pre) llama.cpp gives the special tokens of some
	// models strip attributes: with a Name containing "phi-3" or "phi3",
	// Encode drops the whitespace after most special tokens.
	Name, Architecture string

	AddBOS bool // tokenizer.ggml.add_bos_token
	AddEOS bool // tokenizer.ggml.add_eos_token
	// AddSpacePrefix is tokenizer.ggml.add_space_prefix. llama.cpp's BPE
	// tokenizer never adds a space, so "gpt2" ignores it.
	AddSpacePrefix bool
}

// NewVocab returns a Vocab for the given tokenizer model holding llama.cpp's
// defaults for every optional key, for a GGUF reader to overwrite with the
// keys the file has. For "llama" these are BOS 1, EOS 2, UNK 0, no PAD or
// EOT, add BOS, do not add EOS, add a space prefix. For "gpt2" it is
// NewVocabPre(model, ""), the defaults of a file without tokenizer.ggml.pre.
func NewVocab(model string) Vocab {
	return NewVocabPre(model, "")
}

// NewVocabPre is NewVocab for a "gpt2" vocabulary with pre-tokenizer pre,
// on which llama.cpp's defaults depend: BOS and EOS 11, no UNK (BPE does
// not use one), no PAD, EOT or EOM, add no EOS, and add a BOS only for the
// Llama 3 family ("llama-bpe", ...); "glm4" has no BOS. An unknown pre
// gets the plain BPE defaults, and New rejects it.
func NewVocabPre(model, pre string) Vocab {
	v := Vocab{Model: model, Pre: pre, BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1,
		EOM: -1, FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1}
	switch model {
	case "llama":
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS, v.AddEOS, v.AddSpacePrefix = true, false, true
	case "gpt2":
		v.BOS, v.EOS = 11, 11
		if p := preTokenizers[pre]; p != nil {
			v.AddBOS = p.addBOS
			if p.noBOS {
				v.BOS = -1
			}
		}
	}
	return v
}

// PreTokenizers returns the tokenizer.ggml.pre values a "gpt2" Vocab may
// have, sorted; "" (no key) is among them.
func PreTokenizers() []string {
	names := make([]string, 0, len(preTokenizers))
	for n := range preTokenizers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Tokenizer encodes text to token ids and decodes ids to text. It is
// immutable after New and safe for concurrent use.
type Tokenizer struct {
	tokens []string
	scores []float32
	types  []int32
	ids    map[string]int32

	bos, eos, eot, unk, pad int32
	eom                     int32
	fim                     [6]int32 // prefix, suffix, middle, pad, repo, separator
	addBOS, addEOS          bool
	addSpacePrefix          bool

	// bpe is the byte-level BPE model of a "gpt2" vocabulary; nil for
	// SentencePiece.
	bpe *bpeModel
	// eog holds the tokens that end generation (llama.cpp's
	// special_eog_ids).
	eog map[int32]bool
	// strip[id] holds the strip attributes of token id (stripLeft,
	// stripRight); nil when no token has any.
	strip []uint8

	// byteToken[b] is the token that stands for byte b in byte fallback,
	// or -1 when the vocabulary has none.
	byteToken [256]int32
	// special lists the control, user-defined and unknown tokens, longest
	// text first, in the order Encode looks for them in its input.
	special []int32
	// pieces[id] is Piece(id), computed once.
	pieces [][]byte
}

// New builds a Tokenizer from v. It fails if the model is neither "llama"
// nor "gpt2", if Scores or Types do not match Tokens in length, if a token
// text repeats, if a special id is out of range or needed but absent, for
// "llama" if some byte has neither a byte token nor an unknown token to
// fall back on, and for "gpt2" if the pre-tokenizer is not supported.
func New(v Vocab) (*Tokenizer, error) {
	var pre *preTokenizer
	switch v.Model {
	case "llama":
	case "gpt2":
		if pre = preTokenizers[v.Pre]; pre == nil {
			return nil, fmt.Errorf("tokenizer: pre-tokenizer %q (tokenizer.ggml.pre) is not supported; supported: %s",
				v.Pre, strings.Join(PreTokenizers()[1:], ", "))
		}
	default:
		return nil, fmt.Errorf("tokenizer: model %q is not supported (only the Llama SentencePiece tokenizer, \"llama\", and byte-level BPE, \"gpt2\")", v.Model)
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: vocabulary is empty")
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens does not fit int32 ids", n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}

	t := &Tokenizer{
		tokens:         make([]string, n),
		scores:         make([]float32, n),
		types:          make([]int32, n),
		ids:            make(map[string]int32, n),
		bos:            v.BOS,
		eos:            v.EOS,
		eot:            v.EOT,
		unk:            v.UNK,
		pad:            v.PAD,
		addBOS:         v.AddBOS,
		addEOS:         v.AddEOS,
		addSpacePrefix: v.AddSpacePrefix,
	}
	copy(t.scores, v.Scores)
	for i, text := range v.Tokens {
		// llama.cpp renames empty tokens so that every text stays unique
		// and non-empty; the new name is what it then matches and prints.
		if text == "" {
			text = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if prev, dup := t.ids[text]; dup {
			return nil, fmt.Errorf("tokenizer: tokens %d and %d have the same text %q", prev, i, text)
		}
		t.tokens[i] = text
		t.ids[text] = int32(i)
		t.types[i] = TypeNormal
		if v.Types != nil {
			t.types[i] = v.Types[i]
			if t.types[i] < TypeUndefined || t.types[i] > TypeByte {
				t.types[i] = TypeUndefined
			}
		}
	}

	type specialID struct {
		name string
		id   int32
	}
	ids := []specialID{{"BOS", v.BOS}, {"EOS", v.EOS}, {"EOT", v.EOT}, {"UNK", v.UNK}, {"PAD", v.PAD}, {"EOM", v.EOM},
		{"FIM prefix", v.FIMPre}, {"FIM suffix", v.FIMSuf}, {"FIM middle", v.FIMMid},
		{"FIM pad", v.FIMPad}, {"FIM repo", v.FIMRep}, {"FIM separator", v.FIMSep}}
	for _, s := range ids {
		if s.id < -1 || s.id >= int32(n) {
			return nil, fmt.Errorf("tokenizer: %s token id %d out of range [0, %d)", s.name, s.id, n)
		}
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, fmt.Errorf("tokenizer: AddBOS is set but the vocabulary has no BOS token")
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, fmt.Errorf("tokenizer: AddEOS is set but the vocabulary has no EOS token")
	}

	// llama.cpp recognises end-of-turn, end-of-generation, EOM and FIM
	// tokens by their texts for every vocabulary type (phi-3's
	// user-defined "</s>" becomes a control token, for one).
	t.markSpecials(v)
	if v.Model == "gpt2" {
		// BPE writes no space prefix, and drops bytes it has no token
		// for instead of falling back on byte tokens.
		t.addSpacePrefix = false
		var err error
		if t.bpe, err = newBPE(t, pre, v.Merges); err != nil {
			return nil, err
		}
	} else {
		for b := range t.byteToken {
			t.byteToken[b] = t.findByteToken(byte(b))
			if t.byteToken[b] < 0 && t.unk < 0 {
				return nil, fmt.Errorf("tokenizer: no token for byte 0x%02X (neither %q nor the byte itself) and no unknown token to fall back on", b, fmt.Sprintf("<0x%02X>", b))
			}
		}
	}

	for id, typ := range t.types {
		if typ == TypeControl || typ == TypeUserDefined || typ == TypeUnknown {
			t.special = append(t.special, int32(id))
		}
	}
	// llama.cpp sorts by length only; ties fall back to id order here so
	// that the result does not depend on the sort algorithm.
	sort.SliceStable(t.special, func(i, j int) bool {
		return len(t.tokens[t.special[i]]) > len(t.tokens[t.special[j]])
	})
	t.setStrip(v)

	t.pieces = make([][]byte, n)
	for id := range t.pieces {
		t.pieces[id] = t.piece(int32(id))
	}
	return t, nil
}

// findByteToken returns the token llama.cpp uses for byte b in byte
// fallback: the token "<0xXX>" (upper-case hex), else a token whose text is
// the byte itself, else -1.
func (t *Tokenizer) findByteToken(b byte) int32 {
	if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
		return id
	}
	if id, ok := t.ids[string([]byte{b})]; ok {
		return id
	}
	return -1
}

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS returns the beginning-of-sequence token id, or -1.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence token id, or -1.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT returns the end-of-turn token id, or -1.
func (t *Tokenizer) EOT() int32 { return t.eot }

// IsEOG reports whether id is one of llama.cpp's end-of-generation
// tokens: EOS, EOT, EOM, the FIM pad, repo and separator tokens, and every
// token whose text llama.cpp takes for an end ("<|eot_id|>", "<|im_end|>",
// "</s>", ...).
func (t *Tokenizer) IsEOG(id int32) bool {
	return t.eog[id]
}

// AddsBOS reports whether the vocabulary asks for a BOS token before the
// text (tokenizer.ggml.add_bos_token, or llama.cpp's default for it): what
// Encode's addSpecial adds, and what llama-tokenize passes as addSpecial.
func (t *Tokenizer) AddsBOS() bool { return t.addBOS }

// Token returns the text of token id as stored in the vocabulary (for
// SentencePiece spaces as "▁" and byte tokens as "<0xXX>", for BPE bytes
// as GPT-2's byte characters, a space as "Ġ"), or "" if id is out of range.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Type returns the type of token id (TypeNormal, TypeControl, ...), or
// TypeUndefined if id is out of range.
func (t *Tokenizer) Type(id int32) int32 {
	if id < 0 || int(id) >= len(t.types) {
		return TypeUndefined
	}
	return t.types[id]
}

// isSpecial reports whether id is a control, user-defined or unknown token:
// the tokens Encode can cut out of its input and after which it starts a
// new run of text with a space prefix.
func (t *Tokenizer) isSpecial(id int32) bool {
	switch t.Type(id) {
	case TypeControl, TypeUserDefined, TypeUnknown:
		return true
	}
	return false
}
