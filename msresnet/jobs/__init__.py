"""Runs on more than one process: the ModelArts-style job, ``msrun`` data parallelism and
chapter 7's reading of its rank records.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
