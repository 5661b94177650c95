"""Real processes and artefacts that the tests and the benchmarks share: the server launcher (`server`), tiny random
models and tokenizers (`fixtures`), and what a client reads back (`client`)."""
