"""The corpus: a vocabulary built from train/valid/test text files, each file one long
tensor of word ids with an `<eos>` id closing every line (as word_language_model's data.py)."""

import os

import torch


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, "train.txt"))
        self.valid = self.tokenize(os.path.join(path, "valid.txt"))
        self.test = self.tokenize(os.path.join(path, "test.txt"))

    def tokenize(self, path):
        assert os.path.exists(path), path
        with open(path, encoding="utf8") as f:
            lines = [[*line.split(), "<eos>"] for line in f]
        ids_per_line = [
            torch.tensor([self.dictionary.add_word(word) for word in words]).type(torch.int64)
            for words in lines
        ]
        return torch.cat(ids_per_line)
