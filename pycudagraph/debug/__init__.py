"""Finding what is wrong with a graph or a capture."""
