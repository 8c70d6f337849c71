"""Looking inside a graph: DOT, the interactive page, the tree, diff, audit."""
