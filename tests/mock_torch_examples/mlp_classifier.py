"""A multilayer perceptron classifying points drawn around three centers.

Plain PyTorch: an nn.Module subclass, CrossEntropyLoss, SGD with momentum and a DataLoader over
a TensorDataset. Prints the loss on the whole data set before and after training and exits
with status 0 only if training lowered it.
"""

import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, in_features, hidden, num_classes, dropout=0.1):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.dropout(F.relu(self.fc2(x)))
        return self.head(x)


def make_blobs(num_samples, num_features, num_classes):
    centers = 1.5 * torch.randn(num_classes, num_features)
    labels = torch.randint(0, num_classes, (num_samples,))
    points = centers[labels] + torch.randn(num_samples, num_features)
    return points, labels


def evaluate(model, loader, criterion, device):
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            total_loss += criterion(logits, targets).item() * targets.size(0)
            correct += (logits.argmax(dim=1) == targets).sum().item()
            count += targets.size(0)
    return total_loss / count, correct / count


def main():
    parser = argparse.ArgumentParser(description="MLP on synthetic blobs")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    points, labels = make_blobs(num_samples=512, num_features=10, num_classes=3)
    dataset = TensorDataset(points, labels)
    train_loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    eval_loader = DataLoader(dataset, batch_size=256)

    model = MLP(10, 64, 3).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    initial_loss, _ = evaluate(model, eval_loader, criterion, device)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for inputs, targets in train_loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        eval_loss, accuracy = evaluate(model, eval_loader, criterion, device)
        print(f"epoch {epoch}: loss {eval_loss:.4f}, accuracy {accuracy:.3f}")

    final_loss, _ = evaluate(model, eval_loader, criterion, device)
    print(f"initial loss: {initial_loss:.6f}")
    print(f"final loss: {final_loss:.6f}")
    sys.exit(0 if final_loss < initial_loss else 1)


if __name__ == "__main__":
    main()
