"""Changing an exec: apply (fewest calls), calibrate, rebind."""
