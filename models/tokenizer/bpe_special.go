package tokenizer

// llama.cpp recognises special tokens by their text as well as by the ids
// a file names, and changes their types: a token so recognised becomes a
// control token, so that Encode cuts it out only when it parses special
// tokens and Piece prints nothing for it. These are its lists
// (llama_vocab::impl::load), applied to "gpt2" vocabularies.
var (
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}

	// eogTexts are the texts of tokens that end generation.
	eogTexts = []string{
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~[",
	}

	// alwaysUserDefined are gpt-oss's tokens, which llama.cpp always makes
	// user-defined so that they print even when special tokens do not.
	alwaysUserDefined = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// findByText returns the token with one of texts, the smallest text when
// several are present (llama.cpp takes the first it meets in a hash map,
// which no other program can reproduce; EOT detection here picks the same
// way), and makes it a control token; -1 if there is none.
func (t *Tokenizer) findByText(texts []string) int32 {
	best := int32(-1)
	for _, text := range texts {
		id, ok := t.ids[text]
		if ok && (best < 0 || text < t.tokens[best]) {
			best = id
		}
	}
	if best >= 0 {
		t.types[best] = TypeControl
	}
	return best
}

// markBPESpecials finds the EOM and FIM tokens the file does not name,
// builds the end-of-generation set, and changes token types as llama.cpp
// does when it loads a BPE vocabulary. Where llama.cpp adds the control
// attribute to a token's others, this sets the type to TypeControl: the
// control attribute decides everything Encode and Piece do with a token.
func (t *Tokenizer) markBPESpecials(v Vocab) {
	eom := v.EOM
	if eom < 0 {
		eom = t.findByText(eomTexts)
	}
	fim := []struct {
		id    int32
		texts []string
	}{
		{v.FIMPre, fimPreTexts}, {v.FIMSuf, fimSufTexts}, {v.FIMMid, fimMidTexts},
		{v.FIMPad, fimPadTexts}, {v.FIMRep, fimRepTexts}, {v.FIMSep, fimSepTexts},
	}
	for i := range fim {
		if fim[i].id < 0 {
			fim[i].id = t.findByText(fim[i].texts)
		}
	}

	t.eog = map[int32]bool{}
	for _, id := range []int32{fim[3].id, fim[4].id, fim[5].id} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, text := range eogTexts {
		if id, ok := t.ids[text]; ok {
			t.eog[id] = true
			t.types[id] = TypeControl
		}
	}
	for _, text := range alwaysUserDefined {
		if id, ok := t.ids[text]; ok {
			t.types[id] = TypeUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}

	// gpt-oss and Solar Open end a message with "<|end|>" but go on
	// generating after it: with their "<|return|>"/"<|call|>" or
	// "<|calls|>"/"<|flush|>", it is an ordinary printable token.
	has := func(text string) bool { id, ok := t.ids[text]; return ok && t.eog[id] }
	if end, ok := t.ids["<|end|>"]; ok && t.eog[end] {
		call := has("<|call|>") || has("<|calls|>")
		if call && (has("<|return|>") || has("<|flush|>")) {
			delete(t.eog, end)
			t.types[end] = TypeUserDefined
		}
	}
	// Gemma 4's "</s>" is text, not the end of anything.
	if s, ok := t.ids["</s>"]; ok && t.eog[s] && has("<|tool_response>") {
		delete(t.eog, s)
		t.types[s] = TypeNormal
	}
}
