#!/usr/bin/env bash
# Tokenization throughput: `dtrain prepare` (byte-level BPE, one thread) against Hugging Face's
# `tokenizers` (encode_batch over the same chunks as shipped, and encode_batch_fast, which skips the
# offsets and gives the same ids, as tuned; each at 1 thread and at 2 threads) on
# the same corpora with the same tokenizer.json, trained here by `tokenizers` on the fortune files
# (GPT-2's layout and Llama 3's, 32768 tokens each). Corpora: the fortune files (English, ~2.5 MB),
# and tests/data/tokenizers/corpus.txt repeated to ~2 MB (accents, CJK, emoji, whitespace runs). Each side reports MB/s of encoding alone (tokenizer loaded, file read); dtrain's includes
# writing its shards. ROUNDS rounds alternate the sides, each row's number is its best round; the ids
# of both sides are compared (SHA-256 of the uint32 ids). Prints a table; raw output stays in
# bench/out/tokenize_throughput/.
# Usage: bench/tokenize_throughput.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
scripts/setup.sh --bench >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target dtrain_cli >/dev/null  # the one binary this needs
out=bench/out/tokenize_throughput
rm -rf "$out"
mkdir -p "$out"
py=.venv/bin/python

$py - "$out" <<'PY'
import glob, os, sys
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
out = sys.argv[1]
texts = []
for f in sorted(glob.glob("/usr/share/games/fortunes/*")):
    if os.path.isfile(f) and not f.endswith((".dat", ".u8")):
        texts.append("".join("\n" if l == "%\n" else l for l in open(f, encoding="utf-8", errors="replace")))
english = "".join(texts)
if not english:
    sys.exit("the fortunes package is missing (scripts/setup.sh installs it)")
open(f"{out}/english.txt", "w").write(english)
multi = open("tests/data/tokenizers/corpus.txt", encoding="utf-8", newline="").read()
open(f"{out}/multilingual.txt", "w", newline="").write(multi * (2_000_000 // len(multi)))
llama3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
for name, pre, ignore in [("gpt2", pre_tokenizers.ByteLevel(add_prefix_space=False), False),
                          ("llama3", pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(llama3), "isolated"),
                                                              pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), True)]:
    tok = Tokenizer(models.BPE(ignore_merges=ignore))
    tok.pre_tokenizer, tok.decoder = pre, decoders.ByteLevel()
    tok.train_from_iterator([english, multi], trainers.BpeTrainer(vocab_size=32768, special_tokens=["<|endoftext|>"],
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.save(f"{out}/{name}.json")
PY

# dtrain's ids as the peer hashes them: uint32, the shard's header skipped.
ids_hash() { $py -c "import array,glob,hashlib,sys
a=array.array('I')
for f in sorted(glob.glob(sys.argv[1])):
    a.fromlist(array.array('H', open(f, 'rb').read()[1024:]).tolist())
print(hashlib.sha256(a.tobytes()).hexdigest())" "$1"; }

for round in $(seq "$rounds"); do
  for corpus in english multilingual; do
    for tok in gpt2 llama3; do
      echo "round $round: $corpus, $tok..." >&2
      rm -rf "$out/shards"
      build/dtrain prepare --tokenizer "$out/$tok.json" --input "$out/$corpus.txt" --out "$out/shards" --shard-tokens 1000000000 \
        2>&1 >/dev/null | tail -1 | sed "s/^/$corpus $tok dtrain 1 /" >>"$out/raw.txt"
      echo "$corpus $tok hash $(ids_hash "$out/shards/${corpus}_*.bin")" >>"$out/raw.txt"
      for mode in shipped tuned; do
        for threads in 1 2; do
          echo "$corpus $tok tokenizers_$mode $threads $($py bench/tokenize_peer.py "$out/$tok.json" "$out/$corpus.txt" "$threads" $mode)" >>"$out/raw.txt"
        done
      done
    done
  done
done

/usr/bin/python3 - "$out/raw.txt" "$out" <<'PY'
import os, re, sys
best, hashes, peer_hashes = {}, {}, {}
for line in open(sys.argv[1]):
    corpus, tok, side, rest = line.split(" ", 3)
    if side == "hash":
        hashes[(corpus, tok)] = rest.strip(); continue
    threads = rest.split()[0]
    mbs = float(re.search(r"([\d.]+) MB/s", rest).group(1))
    key = (corpus, tok, side, threads)
    best[key] = max(best.get(key, 0), mbs)
    if side.startswith("tokenizers"):
        peer_hashes.setdefault((corpus, tok), set()).add(re.search(r"sha256 (\w+)", rest).group(1))
size = {c: os.path.getsize(f"{sys.argv[2]}/{c}.txt") / 1e6 for c in ("english", "multilingual")}
print("| corpus | tokenizer | dtrain, 1 thread (MB/s) | tokenizers encode_batch, 1 / 2 threads (MB/s) "
      "| tokenizers encode_batch_fast, 1 / 2 threads (MB/s) | dtrain / best tokenizers at 1 thread | same ids |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for corpus in ("english", "multilingual"):
    for tok in ("gpt2", "llama3"):
        d = best[(corpus, tok, "dtrain", "1")]
        s1, s2, f1, f2 = (best[(corpus, tok, f"tokenizers_{m}", t)] for m in ("shipped", "tuned") for t in ("1", "2"))
        same = "yes" if peer_hashes[(corpus, tok)] == {hashes[(corpus, tok)]} else "NO"
        print(f"| {corpus} ({size[corpus]:.1f} MB) | {tok}-style, 32768 | {d:.2f} | {s1:.2f} / {s2:.2f} | {f1:.2f} / {f2:.2f} "
              f"| {d / max(s1, f1):.2f}x | {same} |")
PY
