"""Benchmarks: `make bench` (python -m bench) prints figures and writes them to bench/results/."""
