"""CUDA C++ sources shipped with pycudagraph (read with Module.from_file)."""
