"""Fit a cubic polynomial and a logistic-regression classifier with tideflow tensors and
autograd only (no nn, no optim): the smallest end-to-end use of the core engine."""

import numpy as np

import tideflow as flow


def fit_polynomial(steps: int = 2000, lr: float = 0.5) -> None:
    flow.manual_seed(0)
    x = flow.linspace(-1, 1, 200)
    y = 0.5 - 1.5 * x + 0.8 * x**2 + 2.0 * x**3 + 0.05 * flow.randn(200)
    features = flow.stack([x**k for k in range(4)], dim=1)  # (200, 4): 1, x, x^2, x^3
    w = flow.zeros(4, requires_grad=True)
    for step in range(steps + 1):
        loss = ((features @ w - y) ** 2).mean()
        loss.backward()
        with flow.no_grad():
            w -= lr * w.grad
            w.grad.zero_()
        if step % 500 == 0:
            print(f"  step {step:4d}  mse {loss.item():.5f}")
    exact = flow.linalg.solve(features.T @ features, features.T @ y)  # normal equations
    print(f"  gradient descent: {np.round(w.detach().numpy(), 3)}")
    print(f"  linalg.solve:     {np.round(exact.numpy(), 3)}   (true [0.5 -1.5 0.8 2.0])")


def fit_logistic(steps: int = 300, lr: float = 0.5) -> None:
    flow.manual_seed(1)
    n = 400
    labels = flow.randint(0, 2, (n,))
    centers = flow.tensor([[-1.0, -1.0], [1.0, 1.0]])
    points = centers[labels] + 0.8 * flow.randn(n, 2)
    w = flow.zeros(2, requires_grad=True)
    b = flow.zeros(1, requires_grad=True)
    target = labels.float()
    for step in range(steps + 1):
        logits = points @ w + b
        loss = flow.nn.functional.binary_cross_entropy_with_logits(logits, target)
        loss.backward()
        with flow.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
            w.grad.zero_()
            b.grad.zero_()
        if step % 100 == 0:
            accuracy = ((logits > 0).long() == labels).float().mean().item()
            print(f"  step {step:4d}  bce {loss.item():.4f}  accuracy {accuracy:.3f}")


if __name__ == "__main__":
    print("tideflow demo: cubic polynomial least squares")
    fit_polynomial()
    print("tideflow demo: logistic regression on two Gaussian blobs")
    fit_logistic()
