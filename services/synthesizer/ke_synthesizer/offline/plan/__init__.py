"""Plan layer of the offline synthesizer: the kernel groups of a captured graph
(``Group``, ``Plan``), what each group must store, and the reduction semantics fusion and
row kernels share. Imports only the front end (README.md: *Layers*)."""
