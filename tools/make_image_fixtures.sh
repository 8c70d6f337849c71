#!/bin/sh
# Rebuild the device-image fixtures of tests/compile/test_images.py from their source
# with nvcc (they were made with nvcc 13.0). Run from the repository root.
set -e
cd tests/compile/data
nvcc -ptx -arch=compute_75 -o images.ptx images.cu
nvcc -cubin -arch=sm_90 -o images.cubin images.cu
# sm_90 code and compute_90 PTX, uncompressed: every member readable without a GPU
nvcc -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
     -compress-mode=none -o images.fatbin images.cu
# nvcc's default (12.8+): PTX members compressed; with -compress-mode=size, all of them
nvcc -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
     -compress-mode=size -o images_compressed.fatbin images.cu
