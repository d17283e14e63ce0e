"""A custom autograd.Function (a clamped exponential with a hand-written backward) inside a
model, checked against autograd with torch.autograd.grad and gradcheck.

Plain PyTorch. The model predicts positive rates through ClampedExp, which keeps exp from
overflowing early in training. Training adds a small penalty on the input gradient
(torch.autograd.grad with create_graph=True), so the hand-written backward is itself
differentiated. Prints the loss before and after training and exits with status 0 only if the
custom gradient matched autograd's and training lowered the loss.
"""

import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class ClampedExp(torch.autograd.Function):
    """exp(min(input, cap)): the exponential below `cap`, constant above it."""

    @staticmethod
    def forward(ctx, input, cap):
        output = input.clamp(max=cap).exp()
        ctx.save_for_backward(input, output)
        ctx.cap = cap
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, output = ctx.saved_tensors
        below_cap = (input <= ctx.cap).to(grad_output.dtype)
        return grad_output * output * below_cap, None


class RateModel(nn.Module):
    def __init__(self, in_features, hidden, cap=6.0):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_features, hidden), nn.Tanh())
        self.log_rate = nn.Linear(hidden, 1)
        self.cap = cap

    def forward(self, x):
        return ClampedExp.apply(self.log_rate(self.body(x)), self.cap).squeeze(-1)


def check_backward(cap=1.0):
    """The hand-written backward against autograd through clamp and exp."""
    x = torch.randn(32, dtype=torch.float64, requires_grad=True)
    (custom,) = torch.autograd.grad(ClampedExp.apply(x, cap).sum(), x)
    (reference,) = torch.autograd.grad(torch.exp(torch.clamp(x, max=cap)).sum(), x)
    matches = torch.allclose(custom, reference)
    passes_gradcheck = torch.autograd.gradcheck(lambda t: ClampedExp.apply(t, cap), (x,))
    print(f"custom backward matches autograd: {matches}, gradcheck: {passes_gradcheck}")
    return matches and passes_gradcheck


def main():
    parser = argparse.ArgumentParser(description="Custom autograd.Function in a rate model")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--penalty", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    backward_ok = check_backward()

    inputs = torch.randn(256, 4)
    true_weights = torch.tensor([0.8, -0.5, 0.3, 0.0])
    targets = torch.exp(inputs @ true_weights) + 0.05 * torch.randn(256)

    model = RateModel(4, 16)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    with torch.no_grad():
        initial_loss = F.mse_loss(model(inputs), targets).item()
    for step in range(1, args.steps + 1):
        x = inputs.clone().requires_grad_(True)
        rates = model(x)
        loss = F.mse_loss(rates, targets)
        (input_grad,) = torch.autograd.grad(rates.sum(), x, create_graph=True)
        objective = loss + args.penalty * input_grad.pow(2).sum(dim=1).mean()
        optimizer.zero_grad()
        objective.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.4f}")

    with torch.no_grad():
        final_loss = F.mse_loss(model(inputs), targets).item()
    print(f"initial loss: {initial_loss:.6f}")
    print(f"final loss: {final_loss:.6f}")
    sys.exit(0 if backward_ok and final_loss < initial_loss else 1)


if __name__ == "__main__":
    main()
