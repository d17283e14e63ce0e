"""Run on every rank under mpiexec (or the launcher) with N = dp x tp x pp ranks:
`python train_gpt.py REFERENCE.json OUT_DIR DP TP PP`. Trains the char-GPT with
`train_char_gpt` (what `tideflow train gpt --dp --tp --pp` calls) on the reference's text and
config, and checks it against the one-process run the test recorded in REFERENCE.json: the
same per-step losses and validation loss on every rank, and on rank 0 a one-file checkpoint
of whole tensors (model and AdamW state) equal to the one-process checkpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from global_checks import RANK, close, done

from tideflow.io import load
from tideflow.models.char_gpt import CharGPTTrainConfig, load_char_gpt, train_char_gpt

reference_file, out_dir, dp, tp, pp = sys.argv[1:]
reference = json.loads(Path(reference_file).read_text())
out = Path(out_dir) / "parallel.safetensors"
config = CharGPTTrainConfig(
    **{**reference["config"], "dp": int(dp), "tp": int(tp), "pp": int(pp), "out": str(out)}
)
result = train_char_gpt(config, text=reference["text"], log=lambda line: None)

# NOTE: tolerances of float32 rounding: the layouts add partial sums in other orders
close(result.losses, reference["losses"], "per-step losses", atol=2e-5)
close(result.val_loss, reference["val_loss"], "validation loss", atol=2e-5)


def check_whole_tensors(got, want, what: str) -> None:
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), f"{what}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            check_whole_tensors(got[key], want[key], f"{what}.{key}")
    elif hasattr(want, "numpy"):
        assert not got.is_global, f"{what}: saved as a global tensor"
        # NOTE: Adam divides each gradient by its size, so rounding differences between the
        # layouts' sums move elements whose gradient is ~0 (the keys' bias has none in exact
        # arithmetic) by far more than float32's precision; a misplaced shard would be off by
        # the tensor's own size
        want = want.numpy()
        close(got.numpy(), want, what, atol=1e-2 * float(np.abs(want).max(initial=0.0)))
    elif isinstance(want, float):
        close(got, want, what, atol=2e-5)
    else:
        assert got == want, f"{what}: {got!r} != {want!r}"


if RANK == 0:
    assert result.sample.startswith(config.prompt), result.sample
    model, _, checkpoint = load_char_gpt(out)  # one process reads what N wrote
    want = load(reference["checkpoint"])
    for part in ("model", "optimizer", "scheduler", "step", "vocab", "model_config"):
        check_whole_tensors(checkpoint[part], want[part], part)
    assert checkpoint["train_config"]["tp"] == int(tp)
    assert np.isfinite(checkpoint["val_loss"])
else:
    assert result.sample == "", "only rank 0 samples"
done()
