"""`make demo`: train a small GPT as a character-level language model on CPython's own
documentation text (no download), in a few minutes on a laptop CPU.

It prints the unigram entropy of the text (the loss of a model that ignores context) next to
the validation loss as training goes, saves a checkpoint, loads it into a fresh model and
prints a sample. The loop is `tideflow.models.char_gpt.train_char_gpt`; this script is
`tideflow train gpt`, and takes the same options (`--help`), e.g.

    python examples/train_gpt.py --steps 2000 --n-layer 6 --n-embd 192 --out gpt.safetensors
"""

import sys

from tideflow.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", "gpt", *sys.argv[1:]]))
