"""A tiny Llama that a real vLLM serves with random weights: made here, nothing downloaded.

Run with the vLLM venv's interpreter (it has `tokenizers`): `python tinymodel.py FOLDER`.  The folder gets a
`config.json` (2 layers, hidden 256), a `generation_config.json` and a byte-level BPE tokenizer trained in a
second on a few sentences.  vLLM starts it with `--load-format dummy`: no weight file is needed, and random
weights make the output repeat, which gives the n-gram proposer a high acceptance (real speculation).
Stdlib and `tokenizers` only: this file is not imported by the tests, it is run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TEXT = [
    "The quick brown fox jumps over the lazy dog.",
    "Speculative decoding drafts tokens and the target model verifies them in one step.",
    "An inference server answers completions over HTTP and streams tokens as they are made.",
    "NCCL moves tensors between ranks; the tensor parallel workers all-reduce every layer.",
    "0123456789 + - * / = ( ) [ ] { } , . ; : ! ? ' \" # $ % & @",
] * 20
MAX_LEN = 2048


def make(folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(TEXT, trainer=trainer)
    tok.save(str(folder / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "pad_token": "<pad>",
                "model_max_length": MAX_LEN,
                "chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}",
            }
        )
    )
    (folder / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"})
    )
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 256,
                "intermediate_size": 512,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 64,
                "vocab_size": vocab,
                "max_position_embeddings": MAX_LEN,
                "rms_norm_eps": 1e-5,
                "rope_theta": 10000.0,
                "hidden_act": "silu",
                "bos_token_id": 0,
                "eos_token_id": 1,
                "pad_token_id": 2,
                "tie_word_embeddings": False,
                "torch_dtype": "bfloat16",
            }
        )
    )
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2})
    )


if __name__ == "__main__":
    make(Path(sys.argv[1]))
    print(sys.argv[1])
