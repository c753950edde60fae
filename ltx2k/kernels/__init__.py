"""Triton kernels, one module per kernel, each ordered jit kernel -> configs -> launcher."""
