"""Checkpoints and tokenizers: the native format and Hugging Face's (Marian, M2M100/NLLB, mBART), the languages a
checkpoint serves, and what it is without its weights (`description`, which the HTTP workers read)."""
