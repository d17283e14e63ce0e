"""A small rendition of pytorch/examples' word_language_model (main.py + model.py + data.py):
the same program structure and PyTorch calls, with a tiny built-in corpus and small defaults.

It trains an LSTM/GRU/RNN or Transformer language model with plain SGD (`p.data.add_`),
gradient clipping and learning-rate annealing, saves the whole model whenever the validation
loss improves (`torch.save(model, f)`), loads the best one back with
`torch.load(f, weights_only=False)`, and evaluates it on the test set. It prints the
validation loss before training and the reloaded model's at the end, and exits with status 0
only if training lowered it.
"""

import argparse
import math
import os
import sys
import tempfile
import time

import data
import model
import torch
import torch.nn as nn
import torch.onnx

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser(description="Word-level language model on a tiny corpus")
parser.add_argument("--data", type=str, default=os.path.join(HERE, "data"))
parser.add_argument(
    "--model", type=str, default="LSTM", help="RNN_TANH, RNN_RELU, LSTM, GRU, Transformer"
)
parser.add_argument("--emsize", type=int, default=32)
parser.add_argument("--nhid", type=int, default=32)
parser.add_argument("--nlayers", type=int, default=2)
parser.add_argument("--lr", type=float, default=20)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch_size", type=int, default=10, metavar="N")
parser.add_argument("--bptt", type=int, default=20)
parser.add_argument("--dropout", type=float, default=0.2)
parser.add_argument(
    "--tied", action="store_true", help="tie the word embedding and softmax weights"
)
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--log-interval", type=int, default=5, metavar="N")
parser.add_argument(
    "--save", type=str, default="", help="where to save the model (default: a temporary file)"
)
parser.add_argument("--onnx-export", type=str, default="")
parser.add_argument("--nhead", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
save_path = args.save or os.path.join(tempfile.mkdtemp(), "model.pt")

corpus = data.Corpus(args.data)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


eval_batch_size = 10
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)

ntokens = len(corpus.dictionary)
if args.model == "Transformer":
    model = model.TransformerModel(
        ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout
    ).to(device)
else:
    model = model.RNNModel(
        args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied
    ).to(device)

criterion = nn.NLLLoss()


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def evaluate(data_source):
    model.eval()
    total_loss = 0.0
    if args.model != "Transformer":
        hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            if args.model == "Transformer":
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    model.train()
    total_loss = 0.0
    start_time = time.time()
    if args.model != "Transformer":
        hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        if args.model == "Transformer":
            output = model(data)
            output = output.view(-1, ntokens)
        else:
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start_time
            batches = len(train_data) // args.bptt
            ms_per_batch = elapsed * 1000 / args.log_interval
            print(
                f"| epoch {epoch:3d} | {batch:5d}/{batches:5d} batches | lr {lr:02.2f} | "
                f"ms/batch {ms_per_batch:5.2f} | loss {cur_loss:5.2f} | "
                f"ppl {math.exp(cur_loss):8.2f}"
            )
            total_loss = 0
            start_time = time.time()


def export_onnx(path, batch_size, seq_len):
    print(f"The model is also exported in ONNX format at {os.path.realpath(path)}")
    model.eval()
    dummy_input = torch.LongTensor(seq_len * batch_size).zero_().view(-1, batch_size).to(device)
    hidden = model.init_hidden(batch_size)
    torch.onnx.export(model, (dummy_input, hidden), path)


initial_loss = evaluate(val_data)
lr = args.lr
best_val_loss = None
for epoch in range(1, args.epochs + 1):
    epoch_start_time = time.time()
    train()
    val_loss = evaluate(val_data)
    print("-" * 89)
    print(
        f"| end of epoch {epoch:3d} | time: {time.time() - epoch_start_time:5.2f}s | "
        f"valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}"
    )
    print("-" * 89)
    if not best_val_loss or val_loss < best_val_loss:
        with open(save_path, "wb") as f:
            torch.save(model, f)
        best_val_loss = val_loss
    else:
        lr /= 4.0

with open(save_path, "rb") as f:
    model = torch.load(f, weights_only=False)
    # Only the recurrent models have flatten_parameters (cuDNN's packed weights).
    if args.model in ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"]:
        model.rnn.flatten_parameters()

test_loss = evaluate(test_data)
print("=" * 89)
print(f"| End of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
print("=" * 89)

if len(args.onnx_export) > 0:
    export_onnx(args.onnx_export, batch_size=1, seq_len=args.bptt)

final_loss = evaluate(val_data)
print(f"initial loss: {initial_loss:.6f}")
print(f"final loss: {final_loss:.6f}")
sys.exit(0 if final_loss < initial_loss else 1)
