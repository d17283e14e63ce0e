"""A character-level LSTM language model trained on a short built-in text.

Plain PyTorch: nn.Embedding + nn.LSTM + nn.Linear, truncated backpropagation through time with
the hidden state carried (detached) between chunks, gradient clipping with clip_grad_norm_,
and a short sample drawn with torch.multinomial at the end. Prints the loss on the whole text
before and after training and exits with status 0 only if training lowered it.
"""

import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
    "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it "
    "was the season of Light, it was the season of Darkness, it was the spring of hope, it "
    "was the winter of despair, we had everything before us, we had nothing before us, we "
    "were all going direct to Heaven, we were all going direct the other way."
)


class CharLM(nn.Module):
    def __init__(self, vocab_size, embedding_dim, hidden_size, num_layers=1, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(
            embedding_dim, hidden_size, num_layers=num_layers, dropout=dropout, batch_first=True
        )
        self.decoder = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens, hidden=None):
        output, hidden = self.lstm(self.embedding(tokens), hidden)
        return self.decoder(output), hidden


def batchify(data, batch_size):
    """Cut the token stream into `batch_size` parallel rows, as the word_language_model does."""
    num_steps = data.size(0) // batch_size
    return data[: num_steps * batch_size].view(batch_size, num_steps)


def repackage_hidden(hidden):
    """Detach the carried state so backpropagation stops at the chunk boundary."""
    if isinstance(hidden, torch.Tensor):
        return hidden.detach()
    return tuple(repackage_hidden(h) for h in hidden)


def evaluate(model, rows, bptt):
    model.eval()
    total_loss, hidden = 0.0, None
    with torch.no_grad():
        for start in range(0, rows.size(1) - 1, bptt):
            length = min(bptt, rows.size(1) - 1 - start)
            inputs = rows[:, start : start + length]
            targets = rows[:, start + 1 : start + 1 + length]
            logits, hidden = model(inputs, hidden)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
            total_loss += loss.item() * length
    return total_loss / (rows.size(1) - 1)


def sample(model, stoi, itos, prompt, length, temperature=0.8):
    model.eval()
    tokens = torch.tensor([[stoi[c] for c in prompt]])
    out = list(prompt)
    with torch.no_grad():
        logits, hidden = model(tokens)
        for _ in range(length):
            probs = F.softmax(logits[0, -1] / temperature, dim=-1)
            next_token = torch.multinomial(probs, num_samples=1)
            out.append(itos[next_token.item()])
            logits, hidden = model(next_token.view(1, 1), hidden)
    return "".join(out)


def main():
    parser = argparse.ArgumentParser(description="Character-level LSTM language model")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--bptt", type=int, default=25)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--clip", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    itos = dict(enumerate(chars))
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    rows = batchify(data, batch_size=8)

    model = CharLM(len(chars), embedding_dim=16, hidden_size=64)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    initial_loss = evaluate(model, rows, args.bptt)
    for epoch in range(1, args.epochs + 1):
        model.train()
        hidden = None
        for start in range(0, rows.size(1) - 1, args.bptt):
            length = min(args.bptt, rows.size(1) - 1 - start)
            inputs = rows[:, start : start + length]
            targets = rows[:, start + 1 : start + 1 + length]
            hidden = None if hidden is None else repackage_hidden(hidden)
            optimizer.zero_grad()
            logits, hidden = model(inputs, hidden)
            loss = F.cross_entropy(logits.reshape(-1, len(chars)), targets.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
        print(f"epoch {epoch}: loss {evaluate(model, rows, args.bptt):.4f}")

    final_loss = evaluate(model, rows, args.bptt)
    print(f"sample: {sample(model, stoi, itos, 'it was ', 40)!r}")
    print(f"initial loss: {initial_loss:.6f}")
    print(f"final loss: {final_loss:.6f}")
    sys.exit(0 if final_loss < initial_loss else 1)


if __name__ == "__main__":
    main()
