"""Makes the tokenizer fixtures beside it from corpus.txt: three tiny tokenizers trained on it and the
ids the reference libraries give the corpus. Run once, from the repository root:
    .venv/bin/python tests/data/tokenizers/make_fixtures.py
(scripts/setup.sh --bench installs `tokenizers` and `sentencepiece`)."""
import io
import json
import os

import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

here = os.path.dirname(os.path.abspath(__file__))
corpus_path = os.path.join(here, "corpus.txt")
with open(corpus_path, encoding="utf-8", newline="") as f:
    corpus = f.read()

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_level_bpe(pre_tokenizer, specials, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([corpus_path], trainer)
    return tok


def write_ids(name, ids):
    with open(os.path.join(here, name), "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")


gpt2 = byte_level_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"], False)
gpt2.save(os.path.join(here, "gpt2_style.json"))
write_ids("corpus.gpt2_style.ids", gpt2.encode(corpus, add_special_tokens=False).ids)

llama3 = byte_level_bpe(pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
    ["<|begin_of_text|>", "<|end_of_text|>"], True)
llama3.save(os.path.join(here, "llama3_style.json"))
write_ids("corpus.llama3_style.ids", llama3.encode(corpus, add_special_tokens=False).ids)

# Llama 2's settings: BPE, byte fallback, digits split, text kept as it is. character_coverage below
# 1 leaves the rarest characters (CJK, emoji) out of the pieces, so that they fall back to bytes.
model = io.BytesIO()
spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus.splitlines()), model_writer=model, model_type="bpe",
                               vocab_size=600, byte_fallback=True, split_digits=True, character_coverage=0.98,
                               normalization_rule_name="identity", remove_extra_whitespaces=False,
                               hard_vocab_limit=False, add_dummy_prefix=True, num_threads=1)
with open(os.path.join(here, "sentencepiece.model"), "wb") as f:
    f.write(model.getvalue())
sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
write_ids("corpus.sentencepiece.ids", sp.encode(corpus))
