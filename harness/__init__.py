"""Real processes and artefacts that the tests and the benchmarks share: the server launcher (`harness.server`), tiny
random models and tokenizers (`harness.fixtures`), and what a client reads back (`harness.client`)."""
