"""The network: its architecture (`config`), building blocks (`layers`), the encoder-decoder (`transformer`), a
decode step's inputs (`step`), and how its weights run on CPU (`packed`, `precision`)."""
