"""The peer of bench/tokenize_throughput.sh: Hugging Face `tokenizers` encoding a corpus in the chunks
dtrain prepare cuts (a line start at or past each MiB), timed from the loaded tokenizer to the last id.
Prints one line: MB/s, the token count and a SHA-256 of the ids as uint32, to compare with dtrain's.
Usage: tokenize_peer.py TOKENIZER_JSON CORPUS THREADS [shipped|tuned] (THREADS 1 turns the library's
parallelism off; "tuned" calls encode_batch_fast, which skips the character offsets dtrain does not
make either and gives the same ids; "shipped", the default, encode_batch, what most code calls)."""
import array
import hashlib
import os
import sys
import time

path, corpus, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
tuned = len(sys.argv) > 4 and sys.argv[4] == "tuned"
if threads == 1:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
else:
    os.environ["RAYON_NUM_THREADS"] = str(threads)
from tokenizers import Tokenizer  # noqa: E402  (after the environment that sets its thread count)

data = open(corpus, "rb").read()
chunks, start = [], 0
while start < len(data):
    end = start + (1 << 20)
    while end < len(data) and not (data[end - 1] == 0x0A and 0x20 < data[end] < 0x7F):
        end += 1
    end = min(end, len(data))
    chunks.append(data[start:end].decode("utf-8"))
    start = end
tok = Tokenizer.from_file(path)
t0 = time.perf_counter()
encodings = (tok.encode_batch_fast if tuned else tok.encode_batch)(chunks, add_special_tokens=False)
seconds = time.perf_counter() - t0
ids = array.array("I", (i for e in encodings for i in e.ids))
print(f"{len(data) / seconds / 1e6:.2f} MB/s tokens {len(ids)} sha256 {hashlib.sha256(ids.tobytes()).hexdigest()}")
