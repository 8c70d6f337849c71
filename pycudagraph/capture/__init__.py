"""Capture: streams into graphs, capture control, conditional bodies, forks, bucketed graphs."""
