"""Small subword tokenizer shared by our preprocessing scripts."""
from collections import Counter


class SubwordTokenizer:
    def __init__(self, max_vocab=512, min_freq=2):
        self.max_vocab = max_vocab
        self.min_freq = min_freq
        self.vocab = {"<pad>": 0, "<unk>": 1}

    def fit(self, lines):
        counts = Counter()
        for line in lines:
            for w in line.lower().split():
                counts[w] += 1
                for i in range(len(w) - 2):
                    counts["##" + w[i:i + 3]] += 1
        for piece, n in counts.most_common(self.max_vocab - 2):
            if n >= self.min_freq:
                self.vocab[piece] = len(self.vocab)
        return self

    def encode(self, line, max_len):
        ids = []
        for w in line.lower().split():
            if w in self.vocab:
                ids.append(self.vocab[w])
            else:
                ids.extend(self.vocab.get("##" + w[i:i + 3], 1) for i in range(max(1, len(w) - 2)))
        ids = ids[:max_len]
        return ids + [0] * (max_len - len(ids))

    def __len__(self):
        return len(self.vocab)
