"""The graph file format: schema, checks, slots, modules, save, load."""
