"""Real processes and artefacts that the tests and the benchmarks share: the server launcher (`server`), tiny random
models and tokenizers (`fixtures`), what a client reads back (`client`), and the server's processes as the OS sees
them (`procs`)."""
