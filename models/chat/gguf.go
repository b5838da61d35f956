package chat

import (
	"errors"
	"fmt"

	"hybrid/models/gguf"
)

// MetadataKey is the GGUF metadata key of a model's chat template.
const MetadataKey = "tokenizer.chat_template"

// ChatML is the template used for a model whose GGUF file has no chat
// template: llama.cpp's own fallback (CHATML_TEMPLATE_SRC in
// common/chat.cpp), byte for byte, so that both runtimes prompt such a model
// alike. ChatML (<|im_start|>role\n...<|im_end|>\n) is also what most
// instruction-tuned models without a template of their own were tuned on.
const ChatML = "{%- for message in messages -%}\n" +
	"  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n" +
	"{%- endfor -%}\n" +
	"{%- if add_generation_prompt -%}\n" +
	"  {{- '<|im_start|>assistant\\n' -}}\n" +
	"{%- endif -%}"

// Metadata is the part of a GGUF file FromGGUF reads (*gguf.File has it).
type Metadata interface {
	GetString(key string) (string, error)
}

// FromGGUF parses the chat template of a model: the string under
// tokenizer.chat_template, or ChatML when the key is missing or empty (as
// llama.cpp does; it also takes the literal value "chatml" to mean ChatML).
// isDefault reports that the fallback was used. A key of another type, or a
// template that does not parse, is an error.
func FromGGUF(md Metadata) (t *Template, isDefault bool, err error) {
	src, err := md.GetString(MetadataKey)
	switch {
	case errors.Is(err, gguf.ErrMissingKey):
		src = ""
	case err != nil:
		return nil, false, fmt.Errorf("chat: %w", err)
	}
	if src == "" || src == "chatml" {
		t, err := Parse(ChatML)
		return t, true, err
	}
	t, err = Parse(src)
	if err != nil {
		return nil, false, fmt.Errorf("chat: %s: %w", MetadataKey, err)
	}
	return t, false, nil
}
