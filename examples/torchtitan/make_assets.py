"""make_assets.py DIR: a tokenizer and a dataset for torchtitan's debug model without a hub.

torchtitan's llama3_debugmodel reads a Hugging Face tokenizer directory (--hf_assets_path:
tokenizer.json and tokenizer_config.json) and the c4_test dataset (--dataloader.dataset_path,
JSON lines with a "text" field); its wheel ships neither. This writes
  DIR/tokenizer/  a word-level tokenizer: <unk>, <|begin_of_text|>, <|end_of_text|> and the
                  2,000 words w0 ... w1999 (2,003 tokens < the debug model's 2,048)
  DIR/c4_test/data.json  64 lines of 300 of those words (a fixed seed: the same bytes on
                  every machine)
with the `tokenizers` package torchtitan already needs."""
import json
import os
import random
import sys

from tokenizers import Tokenizer, models, pre_tokenizers


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    os.makedirs(os.path.join(out, "c4_test"), exist_ok=True)
    words = ["w%d" % i for i in range(2000)]
    vocab = {"<unk>": 0, "<|begin_of_text|>": 1, "<|end_of_text|>": 2}
    for w in words:
        vocab[w] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(out, "tokenizer", "tokenizer.json"))
    with open(os.path.join(out, "tokenizer", "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, f)
    rng = random.Random(1)
    with open(os.path.join(out, "c4_test", "data.json"), "w") as f:
        for _ in range(64):
            f.write(json.dumps({"text": " ".join(rng.choice(words) for _ in range(300))}) + "\n")


if __name__ == "__main__":
    main()
