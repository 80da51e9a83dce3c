"""Front end of the offline synthesizer: runs and captures a spec's forward (torch.fx and
the fallback tracers), rewrites library compositions into known ops, normalises every
spelling of an op and answers shape / dtype questions about graph nodes. Imports nothing
else of the synthesizer (README.md: *Layers*)."""
