"""The requests every end-to-end run sends: prompts sharing about 2.5 blocks, so that later requests hit the
prefix cache and vLLM copies Mamba/GDN states between blocks (align mode), and repeated n-grams, so that an
ngram speculator finds drafts. Token ids only: the tiny models' tokenizer maps id i to the word "w{i}"."""
FIRST_WORD = 3  # ids 0-2 are the special tokens
VOCAB = 256
MAX_TOKENS = 16


def prompts(block_size, rng):
    """(prompts sent one at a time, rounds of prompts sent together), all sharing one prefix."""
    shared = [rng.randrange(FIRST_WORD, VOCAB) for _ in range(block_size * 5 // 2)]

    def prompt(length):
        motif = [rng.randrange(FIRST_WORD, VOCAB) for _ in range(4)]
        tail = [rng.randrange(FIRST_WORD, VOCAB) for _ in range(length)]
        return shared + motif + tail + motif + tail[:3]

    singles = [prompt(n) for n in (5, 9, 13)]
    rounds = [[prompt(n) for n in (3, 6, 11, 17)], [prompt(n) for n in (4, 8)]]
    return singles, rounds
