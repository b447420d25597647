"""Writes the vision-language benchmark's fixed data set: N images of one size (RGB noise, seeded)
and a text of one length per sample, as a `vlm:FILE.jsonl` source, so that every row of a
micro-batch holds the same number of image and text tokens and the PyTorch peer can take exactly
the same shapes. Standard library only (a PNG is zlib-compressed rows behind three chunks).
Usage: /usr/bin/python3 bench/vlm_data.py DIR SAMPLES WIDTH HEIGHT TEXT_CHARS   (writes DIR/train.jsonl)"""
import json
import os
import random
import struct
import sys
import zlib


def png(width, height, rgb_rows):
    """The bytes of an 8-bit RGB PNG whose rows are `rgb_rows` (bytes of 3·width each)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + row for row in rgb_rows)  # filter type 0 on every row
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def main():
    out, samples, width, height, chars = sys.argv[1], *map(int, sys.argv[2:6])
    os.makedirs(f"{out}/images", exist_ok=True)
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz "
    with open(f"{out}/train.jsonl", "w") as jsonl:
        for i in range(samples):
            name = f"images/{i:05d}.png"
            rows = [bytes(rng.getrandbits(8) for _ in range(3 * width)) for _ in range(height)]
            with open(f"{out}/{name}", "wb") as f:
                f.write(png(width, height, rows))
            text = "".join(rng.choice(letters) for _ in range(chars))
            jsonl.write(json.dumps({"image": name, "text": text}) + "\n")


if __name__ == "__main__":
    main()
