"""A tiny transformer encoder classifying variable-length token sequences.

Plain PyTorch: nn.Embedding with a learned positional embedding, nn.TransformerEncoder over
nn.TransformerEncoderLayer(batch_first=True) with a key padding mask, masked mean pooling and
AdamW. A sequence is labelled 1 when it holds more 1-tokens than 2-tokens. Prints the loss on
the whole data set before and after training and exits with status 0 only if training lowered
it.
"""

import argparse
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

PAD = 0
VOCAB_SIZE = 6
MAX_LEN = 12


def make_sequences(num_samples):
    tokens = torch.randint(1, VOCAB_SIZE, (num_samples, MAX_LEN))
    lengths = torch.randint(4, MAX_LEN + 1, (num_samples,))
    padding = torch.arange(MAX_LEN).unsqueeze(0) >= lengths.unsqueeze(1)
    tokens = tokens.masked_fill(padding, PAD)
    labels = ((tokens == 1).sum(dim=1) > (tokens == 2).sum(dim=1)).long()
    return tokens, labels


class TransformerClassifier(nn.Module):
    def __init__(self, d_model=32, nhead=4, num_layers=2, dim_feedforward=64, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB_SIZE, d_model, padding_idx=PAD)
        self.pos_embedding = nn.Parameter(torch.zeros(1, MAX_LEN, d_model))
        nn.init.normal_(self.pos_embedding, std=0.02)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_feedforward, dropout=0.1, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        padding_mask = tokens == PAD
        x = self.embedding(tokens) + self.pos_embedding[:, : tokens.size(1)]
        x = self.encoder(x, src_key_padding_mask=padding_mask)
        keep = (~padding_mask).unsqueeze(-1).to(x.dtype)
        pooled = (x * keep).sum(dim=1) / keep.sum(dim=1)
        return self.head(pooled)


def evaluate(model, loader, criterion):
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for tokens, labels in loader:
            logits = model(tokens)
            total_loss += criterion(logits, labels).item() * len(labels)
            correct += (logits.argmax(-1) == labels).sum().item()
    return total_loss / len(loader.dataset), correct / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser(description="Transformer encoder on token counting")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    tokens, labels = make_sequences(512)
    dataset = TensorDataset(tokens, labels)
    train_loader = DataLoader(dataset, batch_size=32, shuffle=True)
    eval_loader = DataLoader(dataset, batch_size=256)

    model = TransformerClassifier()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    initial_loss, _ = evaluate(model, eval_loader, criterion)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch_tokens, batch_labels in train_loader:
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(batch_tokens), batch_labels)
            loss.backward()
            optimizer.step()
        eval_loss, accuracy = evaluate(model, eval_loader, criterion)
        print(f"epoch {epoch}: loss {eval_loss:.4f}, accuracy {accuracy:.3f}")

    final_loss, _ = evaluate(model, eval_loader, criterion)
    print(f"initial loss: {initial_loss:.6f}")
    print(f"final loss: {final_loss:.6f}")
    sys.exit(0 if final_loss < initial_loss else 1)


if __name__ == "__main__":
    main()
