"""A small convolutional network telling apart four kinds of 1x16x16 images.

Plain PyTorch: Conv2d / BatchNorm2d / ReLU / MaxPool2d feature layers, a Linear head, Adam
with a StepLR schedule. Each image holds a horizontal bar, a vertical bar, a diagonal or a
square at a random place, plus noise. Prints the loss on the whole data set before and after
training and exits with status 0 only if training lowered it.
"""

import argparse
import sys

import torch
import torch.nn as nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

SIZE = 16
NUM_CLASSES = 4


def draw(kind, row, col):
    image = torch.zeros(SIZE, SIZE)
    if kind == 0:
        image[row, 2:-2] = 1.0
    elif kind == 1:
        image[2:-2, col] = 1.0
    elif kind == 2:
        image += torch.eye(SIZE).roll(shifts=col - SIZE // 2, dims=1)
    else:
        image[row : row + 5, col : col + 5] = 1.0
    return image


def make_images(num_samples):
    labels = torch.randint(0, NUM_CLASSES, (num_samples,))
    places = torch.randint(2, SIZE - 7, (num_samples, 2))
    images = torch.stack(
        [
            draw(kind, row, col)
            for kind, (row, col) in zip(labels.tolist(), places.tolist(), strict=True)
        ]
    )
    images = images + 0.3 * torch.randn(num_samples, SIZE, SIZE)
    return images.unsqueeze(1), labels


class ConvNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * (SIZE // 4) ** 2, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def evaluate(model, loader, criterion):
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for images, labels in loader:
            logits = model(images)
            total_loss += criterion(logits, labels).item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
    return total_loss / len(loader.dataset), correct / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser(description="ConvNet on synthetic shapes")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True
    images, labels = make_images(512)
    dataset = TensorDataset(images, labels)
    train_loader = DataLoader(dataset, batch_size=32, shuffle=True, drop_last=True)
    eval_loader = DataLoader(dataset, batch_size=128)

    model = ConvNet(NUM_CLASSES)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=2, gamma=0.5)

    initial_loss, _ = evaluate(model, eval_loader, criterion)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch_images, batch_labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(batch_images), batch_labels)
            loss.backward()
            optimizer.step()
        scheduler.step()
        eval_loss, accuracy = evaluate(model, eval_loader, criterion)
        print(
            f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.5f}, "
            f"loss {eval_loss:.4f}, accuracy {accuracy:.3f}"
        )

    final_loss, _ = evaluate(model, eval_loader, criterion)
    print(f"initial loss: {initial_loss:.6f}")
    print(f"final loss: {final_loss:.6f}")
    sys.exit(0 if final_loss < initial_loss else 1)


if __name__ == "__main__":
    main()
