"""A training run that checkpoints and resumes exactly. tests/unit/test_resume.py runs it in
fresh processes and compares the results bit for bit:

    python resumable_training.py --steps 20 --checkpoint one_go.safetensors
    python resumable_training.py --steps 11 --checkpoint ckpt.safetensors
    python resumable_training.py --resume ckpt.safetensors --steps 20 --checkpoint end.safetensors

Everything that decides the next step is in the checkpoint: the model, AdamW's moments, the
warmup + cosine schedule, the default generator (dropout draws from it) and the place in the
data: the shuffling loader's generator as it was when the epoch began, and how many of the
epoch's batches are done. Resuming mid-epoch replays that epoch's shuffle and skips the done
batches; the dataset is deterministic, so skipping draws nothing from the default generator.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

import tideflow as flow
from tideflow import nn
from tideflow.optim import AdamW
from tideflow.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from tideflow.utils.data import DataLoader, TensorDataset

TOTAL_STEPS = 20  # the schedule's length
WARMUP_STEPS = 4
SAMPLES, BATCH_SIZE = 48, 8  # 6 batches an epoch


class Run:
    """The model, optimizer, schedule and data of one run, and how far it has trained."""

    def __init__(self) -> None:
        flow.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 4))
        self.optimizer = AdamW(self.model.parameters(), lr=1e-2, weight_decay=0.05)
        warmup = LinearLR(self.optimizer, start_factor=0.1, total_iters=WARMUP_STEPS)
        cosine = CosineAnnealingLR(self.optimizer, T_max=TOTAL_STEPS - WARMUP_STEPS)
        self.scheduler = SequentialLR(self.optimizer, [warmup, cosine], [WARMUP_STEPS])
        rng = np.random.default_rng(7)
        data = TensorDataset(
            flow.tensor(rng.standard_normal((SAMPLES, 8)).astype(np.float32)),
            flow.tensor(rng.standard_normal((SAMPLES, 4)).astype(np.float32)),
        )
        self.generator = flow.Generator().manual_seed(1234)
        self.loader = DataLoader(data, BATCH_SIZE, shuffle=True, generator=self.generator)
        self.step = 0
        self.batches_done = 0  # of the current epoch
        self.epoch_start_state: flow.Tensor | None = None  # the loader generator's

    def train(self, until_step: int) -> None:
        while self.step < until_step:
            if self.batches_done == 0:
                self.epoch_start_state = self.generator.get_state()
            else:  # mid-epoch: replay the epoch's shuffle, then skip the batches done
                self.generator.set_state(self.epoch_start_state)
            for x, y in itertools.islice(self.loader, self.batches_done, None):
                self.optimizer.zero_grad()
                nn.functional.mse_loss(self.model(x), y).backward()
                self.optimizer.step()
                self.scheduler.step()
                self.step += 1
                self.batches_done += 1
                if self.step == until_step:
                    return
            self.batches_done = 0

    def state_dict(self) -> dict:
        # Between epochs, the next epoch begins from the generator's state now.
        between_epochs = self.batches_done == 0
        epoch_start_state = self.generator.get_state() if between_epochs else self.epoch_start_state
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng_state": flow.get_rng_state(),
            "data": {
                "step": self.step,
                "batches_done": self.batches_done,
                "epoch_start_state": epoch_start_state,
            },
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        flow.set_rng_state(state["rng_state"])
        self.step = state["data"]["step"]
        self.batches_done = state["data"]["batches_done"]
        self.epoch_start_state = state["data"]["epoch_start_state"]
        self.generator.set_state(self.epoch_start_state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--steps", type=int, required=True, help="train until this step")
    parser.add_argument("--resume", help="a checkpoint to continue from")
    parser.add_argument("--checkpoint", required=True, help="where to save the final state")
    args = parser.parse_args()
    run = Run()
    if args.resume:
        run.load_state_dict(flow.load(args.resume))
    run.train(args.steps)
    flow.save(run.state_dict(), args.checkpoint)


if __name__ == "__main__":
    main()
