#!/usr/bin/env python3
"""A corpus a tiny model can learn, the same on every run: sentences from a small grammar (7 subjects, 7 verbs,
7 objects), for the tests that train srunway-train and PyTorch side by side.

Usage: grammar_corpus.py OUT.txt [LINES]
"""
import random
import sys

subjects = ["the cat", "a dog", "my neighbour", "the old man", "a child", "the teacher", "our team"]
verbs = ["sees", "likes", "finds", "paints", "follows", "writes to", "calls"]
objects = ["the river", "a red ball", "the garden", "a long letter", "the station", "an apple", "the moon"]
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 6000):
        f.write(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}, and then {rng.choice(subjects)} "
                f"{rng.choice(verbs)} {rng.choice(objects)}.\n")
