"""Per-node GPU time of an executable graph: CUPTI, timestamps, records."""
